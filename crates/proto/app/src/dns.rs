//! DNS messages (RFC 1035; mDNS, RFC 6762, shares the format): the header,
//! the first question and the answer records, with names decompressed.
//!
//! A message is parsed into a [`DnsMessage`] the caller keeps and reuses:
//! the names go into one string of the message's, so a parse allocates
//! nothing once the buffers have grown to the traffic's sizes.

use std::ops::Range;

/// Record types whose data weir keeps: an address or a name.
pub const TYPE_A: u16 = 1;
pub const TYPE_NS: u16 = 2;
pub const TYPE_CNAME: u16 = 5;
pub const TYPE_PTR: u16 = 12;
pub const TYPE_MX: u16 = 15;
pub const TYPE_AAAA: u16 = 28;

/// The header's flags word: QR, opcode, AA, TC, RD, RA, Z, AD, CD, rcode.
pub const FLAG_QR: u16 = 0x8000;
pub const FLAG_TC: u16 = 0x0200;

/// A name longer than this (in its wire form, RFC 1035 3.1) is malformed.
const NAME_MAX: usize = 255;
/// A label longer than this is malformed (the top bits 01 and 10 are
/// reserved label types).
const LABEL_MAX: u8 = 63;
/// Answers kept of a message; the rest are counted in `ancount` only.
const ANSWERS_MAX: usize = 64;

/// Why a message did not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DnsError {
    /// Shorter than its header, or a section runs past its end.
    Truncated,
    /// A label over 63 bytes, or a reserved label type.
    BadLabel,
    /// A compression pointer that does not point back before itself
    /// (which is how every loop starts).
    BadPointer,
    /// A name over 255 bytes.
    NameTooLong,
}

impl DnsError {
    /// The counter a parse error is counted under.
    pub fn name(self) -> &'static str {
        match self {
            DnsError::Truncated => "truncated",
            DnsError::BadLabel => "bad_label",
            DnsError::BadPointer => "bad_pointer",
            DnsError::NameTooLong => "name_too_long",
        }
    }
}

/// One answer record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// The owner name: a range of [`DnsMessage::names`].
    pub name: Range<u32>,
    pub rtype: u16,
    pub class: u16,
    pub ttl: u32,
    /// A and AAAA: the address, IPv4 mapped into IPv6.
    pub addr: Option<[u8; 16]>,
    /// CNAME, NS, PTR, MX: the name it holds, a range of the names.
    pub target: Option<Range<u32>>,
}

/// A parsed message: header, first question, answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DnsMessage {
    pub id: u16,
    pub flags: u16,
    pub qdcount: u16,
    pub ancount: u16,
    /// The first question: (name, type, class); `None` when qdcount is 0.
    pub question: Option<(Range<u32>, u16, u16)>,
    pub answers: Vec<Answer>,
    /// Every name of the message, one after the other, dotted, without
    /// the root's final dot ("" is the root).
    pub names: String,
}

impl DnsMessage {
    pub fn is_response(&self) -> bool {
        self.flags & FLAG_QR != 0
    }

    pub fn rcode(&self) -> u8 {
        (self.flags & 0xf) as u8
    }

    pub fn opcode(&self) -> u8 {
        ((self.flags >> 11) & 0xf) as u8
    }

    /// A name of the message by its range.
    pub fn name(&self, r: &Range<u32>) -> &str {
        self.names
            .get(r.start as usize..r.end as usize)
            .unwrap_or("")
    }

    /// The first question's name.
    pub fn qname(&self) -> Option<&str> {
        self.question.as_ref().map(|(n, _, _)| self.name(n))
    }

    /// Parses `msg` into `self` (a DNS message as carried in a UDP
    /// datagram, or over TCP without its length prefix). Answers beyond
    /// the first 64 are not read; the authority and additional sections
    /// are not read. On an error `self` holds what parsed before it.
    pub fn parse(&mut self, msg: &[u8]) -> Result<(), DnsError> {
        self.question = None;
        self.answers.clear();
        self.names.clear();
        if msg.len() < 12 {
            return Err(DnsError::Truncated);
        }
        let be16 = |at: usize| u16::from_be_bytes([msg[at], msg[at + 1]]);
        self.id = be16(0);
        self.flags = be16(2);
        self.qdcount = be16(4);
        self.ancount = be16(6);
        let mut at = 12;
        for q in 0..self.qdcount {
            let name = self.read_name(msg, &mut at)?;
            let fixed = msg.get(at..at + 4).ok_or(DnsError::Truncated)?;
            let (qtype, qclass) = (
                u16::from_be_bytes([fixed[0], fixed[1]]),
                u16::from_be_bytes([fixed[2], fixed[3]]),
            );
            at += 4;
            if q == 0 {
                self.question = Some((name, qtype, qclass));
            } else {
                // Only the first question is kept; its name goes.
                self.names.truncate(name.start as usize);
            }
        }
        for _ in 0..(self.ancount as usize).min(ANSWERS_MAX) {
            let name = self.read_name(msg, &mut at)?;
            let fixed = msg.get(at..at + 10).ok_or(DnsError::Truncated)?;
            let rtype = u16::from_be_bytes([fixed[0], fixed[1]]);
            let class = u16::from_be_bytes([fixed[2], fixed[3]]);
            let ttl = u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
            let rdlen = u16::from_be_bytes([fixed[8], fixed[9]]) as usize;
            at += 10;
            let rdata_at = at;
            let rdata = msg.get(at..at + rdlen).ok_or(DnsError::Truncated)?;
            at += rdlen;
            let mut answer = Answer {
                name,
                rtype,
                class,
                ttl,
                addr: None,
                target: None,
            };
            match (rtype, rdlen) {
                (TYPE_A, 4) => {
                    let mut a = [0u8; 16];
                    a[10] = 0xff;
                    a[11] = 0xff;
                    a[12..].copy_from_slice(rdata);
                    answer.addr = Some(a);
                }
                (TYPE_AAAA, 16) => {
                    let mut a = [0u8; 16];
                    a.copy_from_slice(rdata);
                    answer.addr = Some(a);
                }
                (TYPE_CNAME | TYPE_NS | TYPE_PTR, _) => {
                    let mut p = rdata_at;
                    answer.target = Some(self.read_name(&msg[..rdata_at + rdlen], &mut p)?);
                }
                (TYPE_MX, _) if rdlen > 2 => {
                    let mut p = rdata_at + 2;
                    answer.target = Some(self.read_name(&msg[..rdata_at + rdlen], &mut p)?);
                }
                _ => {}
            }
            self.answers.push(answer);
        }
        Ok(())
    }

    /// Reads the name at `*at` (advancing past it) into the names; returns
    /// its range there. `msg` ends where the name must end (a record's
    /// data); pointers may reach back anywhere before it.
    fn read_name(&mut self, msg: &[u8], at: &mut usize) -> Result<Range<u32>, DnsError> {
        let start = self.names.len();
        let r = read_name_into(msg, at, &mut self.names);
        if r.is_err() {
            self.names.truncate(start);
        }
        r.map(|()| start as u32..self.names.len() as u32)
    }
}

/// Appends the name at `*at` to `out` as text, advancing `*at` past the
/// name's bytes at its place (a pointer's target is read, not passed).
/// Every pointer must point before the start of the labels it follows
/// (the name, or the last pointer's target), so each jump moves the walk
/// back and it ends: loops are refused, not cut off.
fn read_name_into(msg: &[u8], at: &mut usize, out: &mut String) -> Result<(), DnsError> {
    let mut pos = *at;
    let mut floor = pos;
    let mut jumped = false;
    // The wire length: labels and their length bytes, and the root.
    let mut wire_len = 1usize;
    let start = out.len();
    loop {
        let len = *msg.get(pos).ok_or(DnsError::Truncated)?;
        match len >> 6 {
            0 => {}
            3 => {
                let lo = *msg.get(pos + 1).ok_or(DnsError::Truncated)?;
                let target = (((len & 0x3f) as usize) << 8) | lo as usize;
                if !jumped {
                    *at = pos + 2;
                    jumped = true;
                }
                if target >= floor {
                    return Err(DnsError::BadPointer);
                }
                (pos, floor) = (target, target);
                continue;
            }
            _ => return Err(DnsError::BadLabel),
        }
        if len == 0 {
            if !jumped {
                *at = pos + 1;
            }
            return Ok(());
        }
        if len > LABEL_MAX {
            return Err(DnsError::BadLabel);
        }
        wire_len += 1 + len as usize;
        if wire_len > NAME_MAX {
            return Err(DnsError::NameTooLong);
        }
        let label = msg
            .get(pos + 1..pos + 1 + len as usize)
            .ok_or(DnsError::Truncated)?;
        if out.len() > start {
            out.push('.');
        }
        push_label(label, out);
        pos += 1 + len as usize;
    }
}

/// A label as text: printable ASCII as is, other bytes as `\DDD`
/// (RFC 4343's presentation form), a dot inside a label as `\.`.
fn push_label(label: &[u8], out: &mut String) {
    if label
        .iter()
        .all(|&b| b.is_ascii_graphic() && b != b'.' && b != b'\\')
    {
        // Checked ASCII above: always valid UTF-8.
        out.push_str(std::str::from_utf8(label).unwrap_or_default());
        return;
    }
    for &b in label {
        match b {
            b'.' | b'\\' => {
                out.push('\\');
                out.push(b as char);
            }
            _ if b.is_ascii_graphic() => out.push(b as char),
            _ => {
                out.push('\\');
                out.push((b'0' + b / 100) as char);
                out.push((b'0' + b / 10 % 10) as char);
                out.push((b'0' + b % 10) as char);
            }
        }
    }
}

/// Writes a DNS message (for tests, the traffic generator and the
/// benchmarks): a question and answers, names uncompressed except where
/// an answer's owner is the question's name (a pointer to it, as servers
/// write them).
pub fn build(
    id: u16,
    flags: u16,
    question: (&str, u16, u16),
    answers: &[(u16, u32, &[u8])],
) -> Vec<u8> {
    let mut m = Vec::with_capacity(64);
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&flags.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes());
    m.extend_from_slice(&(answers.len() as u16).to_be_bytes());
    m.extend_from_slice(&[0, 0, 0, 0]);
    push_name(&mut m, question.0);
    m.extend_from_slice(&question.1.to_be_bytes());
    m.extend_from_slice(&question.2.to_be_bytes());
    for &(rtype, ttl, rdata) in answers {
        m.extend_from_slice(&[0xc0, 12]);
        m.extend_from_slice(&rtype.to_be_bytes());
        m.extend_from_slice(&question.2.to_be_bytes());
        m.extend_from_slice(&ttl.to_be_bytes());
        m.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        m.extend_from_slice(rdata);
    }
    m
}

/// Appends `name` in wire form (labels of at most 63 bytes; longer ones
/// are cut).
pub fn push_name(m: &mut Vec<u8>, name: &str) {
    for label in name.split('.').filter(|l| !l.is_empty()) {
        let l = &label.as_bytes()[..label.len().min(63)];
        m.push(l.len() as u8);
        m.extend_from_slice(l);
    }
    m.push(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_and_response_with_pointers() {
        let q = build(0x1234, 0x0100, ("www.example.com", TYPE_A, 1), &[]);
        let mut m = DnsMessage::default();
        m.parse(&q).unwrap();
        assert_eq!(m.id, 0x1234);
        assert!(!m.is_response());
        assert_eq!(m.qname(), Some("www.example.com"));
        let mut cname = Vec::new();
        push_name(&mut cname, "web.example.net");
        let r = build(
            0x1234,
            0x8183,
            ("www.example.com", TYPE_A, 1),
            &[(TYPE_CNAME, 60, &cname), (TYPE_A, 300, &[192, 0, 2, 7])],
        );
        m.parse(&r).unwrap();
        assert!(m.is_response());
        assert_eq!(m.rcode(), 3);
        assert_eq!(m.answers.len(), 2);
        assert_eq!(m.name(&m.answers[0].name), "www.example.com");
        assert_eq!(
            m.name(m.answers[0].target.as_ref().unwrap()),
            "web.example.net"
        );
        let a = m.answers[1].addr.unwrap();
        assert_eq!(&a[10..], &[0xff, 0xff, 192, 0, 2, 7]);
        assert_eq!(m.answers[1].ttl, 300);
    }

    #[test]
    fn loops_long_labels_and_long_names_are_errors() {
        let mut m = DnsMessage::default();
        // A name that points at itself.
        let mut msg = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        msg.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
        assert_eq!(m.parse(&msg), Err(DnsError::BadPointer));
        // A forward pointer (the start of a two-step loop).
        let mut msg = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        msg.extend_from_slice(&[1, b'a', 0xc0, 16, 0xc0, 12, 0, 0, 1, 0, 1]);
        assert_eq!(m.parse(&msg), Err(DnsError::BadPointer));
        // A label, then a pointer back to it: a loop through the label.
        let mut msg = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        msg.extend_from_slice(&[1, b'a', 0xc0, 12, 0, 1, 0, 1]);
        assert_eq!(m.parse(&msg), Err(DnsError::BadPointer));
        // A 64-byte label (0x40 is also a reserved type).
        let mut msg = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 64];
        msg.extend_from_slice(&[b'x'; 64]);
        msg.extend_from_slice(&[0, 0, 1, 0, 1]);
        assert_eq!(m.parse(&msg), Err(DnsError::BadLabel));
        // 5 labels of 63: 320 bytes.
        let mut msg = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        for _ in 0..5 {
            msg.push(63);
            msg.extend_from_slice(&[b'y'; 63]);
        }
        msg.extend_from_slice(&[0, 0, 1, 0, 1]);
        assert_eq!(m.parse(&msg), Err(DnsError::NameTooLong));
        // Cut short anywhere: an error, never a panic.
        let r = build(
            7,
            0x8180,
            ("a.b.c", TYPE_AAAA, 1),
            &[(TYPE_AAAA, 1, &[1; 16])],
        );
        for n in 0..r.len() {
            assert!(m.parse(&r[..n]).is_err(), "{n}");
        }
        m.parse(&r).unwrap();
    }

    #[test]
    fn odd_bytes_in_labels_are_escaped() {
        let mut msg = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        msg.extend_from_slice(&[4, b'a', b'.', b' ', 0xff, 0, 0, 1, 0, 1]);
        let mut m = DnsMessage::default();
        m.parse(&msg).unwrap();
        assert_eq!(m.qname(), Some("a\\.\\032\\255"));
    }
}
