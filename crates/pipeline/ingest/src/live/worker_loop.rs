//! The worker loop: blocks from the ring, each frame to the pcap spool
//! and the records; the hand-over to a full-size ring; the drain at the end.

use super::*;

pub(super) struct WorkerOut {
    /// The ring read last, and any it took over from.
    pub(super) rings: Vec<RxRing>,
    pub(super) records: Option<crate::worker::WorkerDone>,
    pub(super) spool: Option<JoinHandle<SpoolReport>>,
    /// The records thread (with pcap), which ends after the pcap writer.
    pub(super) records_thread: Option<JoinHandle<Records>>,
    pub(super) error: Option<String>,
}

pub(super) struct WorkerCtx {
    pub(super) slot: Slot,
    /// The full-size ring to come.
    pub(super) handover: Option<Arc<rings::Handover>>,
    pub(super) spool: Option<(Spool, JoinHandle<SpoolReport>)>,
    /// Records made on this thread: a capture without pcap.
    pub(super) records: Option<Worker>,
    pub(super) records_thread: Option<JoinHandle<Records>>,
    pub(super) disk: DiskWatch,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) claimed: Arc<AtomicU64>,
    pub(super) limit: Option<u64>,
}

/// The per-worker loop: blocks from the ring, frames to the sinks.
pub(super) fn run_worker(ctx: WorkerCtx) -> WorkerOut {
    let WorkerCtx {
        mut slot,
        handover,
        spool,
        mut records,
        records_thread,
        disk,
        stop,
        claimed,
        limit,
    } = ctx;
    // A records error ends the capture; a full disk also gives the reserve
    // back, so that this worker's file (and the others') can still close.
    // With --on-full drop the worker has given its file up (counted) and
    // goes on, dropping records until space returns.
    let failed = |e: StoreError, error: &mut Option<String>| {
        if e.is_disk_full() {
            disk.hit();
            if disk.drop {
                return;
            }
        }
        error.get_or_insert(e.to_string());
        stop.store(true, Ordering::Relaxed);
    };
    // Frames that got no record: the disk was full, or records failed.
    let mut records_skipped = 0u64;
    let (mut spool, spool_handle) = match spool {
        Some((s, h)) => (Some(s), Some(h)),
        None => (None, None),
    };
    let retire = Duration::from_millis(slot.ring.options().retire_ms as u64 * 2 + 5);
    let mut vlan_buf: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut error: Option<String> = None;
    let mut last_tick = Instant::now();
    let c = slot.counters.clone();
    let (worker_id, iface, link) = (slot.worker, slot.iface, slot.link);
    let _ = worker_id;
    let mut door_closed = false;
    let mut ring_blocks = slot.ring.options().block_count;
    // The full-size ring the group deals to now, read once the first ring
    // is drained; and the rings read before, still checked now and then
    // for a last block the kernel handed over late.
    let mut next_ring: Option<RxRing> = None;
    let mut retired: Vec<RxRing> = Vec::new();
    // Drain what a ring holds, not what keeps arriving: under steady
    // traffic the ring would never be empty.
    let close_door = |ring: &RxRing, error: &mut Option<String>| match ring.stop_receiving() {
        Ok(()) => true,
        Err(e) => {
            error.get_or_insert(format!("{}: closing the ring: {e}", ring.iface()));
            false
        }
    };
    loop {
        if next_ring.is_none()
            && let Some(h) = handover.as_ref()
            && let Some(r) = h.take()
        {
            h.settle(&slot.ring, &r);
            if door_closed && !close_door(&r, &mut error) {
                retired.push(r);
                break;
            }
            next_ring = Some(r);
        }
        let stopping = stop.load(Ordering::Relaxed);
        if stopping && !door_closed {
            door_closed = true;
            let next_ok = next_ring.as_ref().is_none_or(|r| close_door(r, &mut error));
            if !next_ok || !close_door(&slot.ring, &mut error) {
                break;
            }
        }
        let (mut frames, mut bytes, mut staged, mut hw) = (0u64, 0u64, 0u64, 0u64);
        // Read once a block, at its first frame (not before the wait for
        // it): a frame's path does not touch shared state, and a block that
        // arrives after space returned is recorded.
        let healthy = error.is_none();
        let mut recording: Option<bool> = None;
        if let Some(s) = spool.as_mut() {
            // A frame may wait in the ring for the pcap writer rather than
            // be dropped from pcap; with records, only while the ring is at
            // most half full, so that records never lose a frame to pcap.
            s.set_patient(records.is_none() || slot.ring.blocks_ready() * 2 <= ring_blocks);
        }
        let timeout = match (&next_ring, stopping) {
            // The last partial block of a ring the group no longer deals
            // to comes when the kernel's retire timer fires.
            (Some(_), _) => retire * 4,
            (None, true) => retire,
            (None, false) => Duration::from_millis(100),
        };
        let mut on_frame = |f: capture::RxFrame<'_>| {
            if let Some(l) = limit
                && claimed.fetch_add(1, Ordering::Relaxed) >= l
            {
                stop.store(true, Ordering::Relaxed);
                return;
            }
            frames += 1;
            hw += f.hw_timestamp as u64;
            // A tag the device took off goes back in, as libpcap does.
            let (data, wire_len) = match f.vlan {
                Some((tci, tpid)) if f.data.len() >= 12 => {
                    vlan_buf.clear();
                    vlan_buf.extend_from_slice(&f.data[..12]);
                    vlan_buf.extend_from_slice(&tpid.to_be_bytes());
                    vlan_buf.extend_from_slice(&tci.to_be_bytes());
                    vlan_buf.extend_from_slice(&f.data[12..]);
                    (&vlan_buf[..], f.wire_len + 4)
                }
                _ => (f.data, f.wire_len),
            };
            bytes += wire_len as u64;
            let pcap = match spool.as_mut() {
                Some(s) => {
                    let p = s.append(f.ts_ns, wire_len, data);
                    staged += p.is_some() as u64;
                    p
                }
                None => None,
            };
            if let Some(w) = records.as_mut() {
                if !*recording.get_or_insert_with(|| healthy && !disk.dropping()) {
                    records_skipped += 1;
                    return;
                }
                let meta = FrameMeta {
                    ts_ns: f.ts_ns,
                    wire_len,
                    link,
                    iface,
                    pcap,
                };
                if let Err(e) = w.frame(meta, data) {
                    failed(e, &mut error);
                    recording = Some(false);
                }
            }
        };
        let result = slot.ring.next_block(timeout, &mut on_frame);
        // A ring read before: a block it handed over late (rare: the
        // kernel's retire timer ran later than the wait above).
        for r in &mut retired {
            if r.blocks_ready() > 0 {
                let _ = r.next_block(Duration::ZERO, &mut on_frame);
            }
        }
        c.frames.fetch_add(frames, Ordering::Relaxed);
        c.bytes.fetch_add(bytes, Ordering::Relaxed);
        c.hw_timestamps.fetch_add(hw, Ordering::Relaxed);
        if let Some(s) = &spool {
            c.pcap_frames.fetch_add(staged, Ordering::Relaxed);
            c.pcap_drops.store(s.dropped, Ordering::Relaxed);
        }
        if let Some(w) = &records {
            c.records.fetch_add(frames, Ordering::Relaxed);
            c.records_drops
                .store(w.rows_lost() + records_skipped, Ordering::Relaxed);
            c.flow_slices_lost
                .store(w.flow_slices_lost(), Ordering::Relaxed);
        }
        let got = match result {
            Ok(n) => n,
            Err(e) => {
                error.get_or_insert(format!("{}: reading the ring: {e}", slot.ring.iface()));
                break;
            }
        };
        if got == 0
            && let Some(r) = next_ring.take()
        {
            // The first ring is drained: from here on, the full-size one.
            retired.push(std::mem::replace(&mut slot.ring, r));
            ring_blocks = slot.ring.options().block_count;
            continue;
        }
        if last_tick.elapsed() >= Duration::from_millis(200) {
            last_tick = Instant::now();
            if let Some(w) = records.as_mut()
                && error.is_none()
                && let Err(e) = w.tick()
            {
                failed(e, &mut error);
            }
            c.ring_backlog
                .store(slot.ring.blocks_ready() as u64, Ordering::Relaxed);
            if let Some(s) = spool.as_mut() {
                // Light traffic: do not let staged frames sit in memory,
                // nor a file stay open past its time.
                s.flush_block();
                s.close_if_due(wall_ns());
                c.pcap_backlog.store(s.backlog() as u64, Ordering::Relaxed);
            }
        }
        if stopping && got == 0 {
            // A full-size ring handed over before this worker said it is
            // ending is drained too.
            match handover.as_ref().and_then(|h| h.close()) {
                Some(r) if close_door(&r, &mut error) => next_ring = Some(r),
                Some(r) => {
                    retired.push(r);
                    break;
                }
                None => break,
            }
        }
    }
    // No ring will be handed over once this worker has ended.
    if let Some(r) = handover.as_ref().and_then(|h| h.close()) {
        retired.push(r);
    }
    retired.extend(next_ring);
    if let Some(s) = spool.take() {
        s.finish();
    }
    // The last file closes here, so that one the disk has no room for is
    // given up and counted like any other.
    if let Some(w) = records.as_mut() {
        if let Err(e) = w.close() {
            failed(e, &mut error);
        }
        c.records_drops
            .store(w.rows_lost() + records_skipped, Ordering::Relaxed);
        c.flow_slices_lost
            .store(w.flow_slices_lost(), Ordering::Relaxed);
    }
    let records = match records.take().map(|w| w.finish()) {
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => {
            failed(e, &mut error);
            None
        }
        None => None,
    };
    retired.push(slot.ring);
    WorkerOut {
        rings: retired,
        records,
        spool: spool_handle,
        records_thread,
        error,
    }
}
