/* The record every stack program hands to user space: one fixed layout for
 * all event types, so that the user-space decoder is one length check and
 * plain field reads (crates/source/stack/src/event.rs mirrors it; a layout test
 * there pins the offsets). */
#ifndef WEIR_EVENT_H
#define WEIR_EVENT_H

enum event_type {
	EV_SEND = 0,        /* application send (sock_send_length) */
	EV_RECV = 1,        /* application receive (sock_recv_length) */
	EV_TCP_PROBE = 2,   /* TCP state on an incoming segment (tcp:tcp_probe) */
	EV_STATE = 3,       /* connection state change (sock:inet_sock_set_state) */
	EV_RETRANSMIT = 4,  /* segment retransmitted (tcp:tcp_retransmit_skb) */
	EV_DEV_XMIT = 5,    /* frame handed to the device driver (net:net_dev_start_xmit) */
	EV_DEV_RECV = 6,    /* frame taken from the device (net:netif_receive_skb) */
	EV_SOCKOPS_RTT = 7, /* sock_ops RTT callback (per ACK, cgroup) */
	EV_SOCKOPS_RETRANS = 8, /* sock_ops retransmission callback */
	EV_SOCKOPS_STATE = 9,   /* sock_ops state callback */
	EV_SNAPSHOT = 10,   /* one socket in an iter/tcp snapshot */
	EV_INTERVAL = 11,   /* per-socket aggregate (never a ring record; its
	                     * `lost` slot counts updates the full map refused) */
	EV_TYPES = 12,
};

/* Device events use only the first DEV_EVENT_SIZE bytes (the programs
 * reserve that much for them: fewer cache lines on the traffic's path);
 * user space pads them to the full size. */
struct event {
	__u64 ts_ns;        /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
	__u64 cookie;       /* socket cookie; 0 when no socket is known */
	__u32 netns;        /* network namespace inode */
	__u8 type;          /* enum event_type */
	__u8 family;        /* AF_INET 2, AF_INET6 10 */
	__u8 proto;         /* IPPROTO_TCP 6, IPPROTO_UDP 17 */
	__u8 state;         /* TCP state (new state for EV_STATE) */
	__u8 laddr[16];     /* local address: IPv4 as ::ffff:a.b.c.d */
	__u8 raddr[16];     /* remote address */
	__u16 lport;        /* host byte order */
	__u16 rport;
	__u32 bytes;        /* application bytes, or the frame's length */
	__u32 payload;      /* transport payload bytes of a frame */
	__u32 seq;          /* see the event table in docs/STACK.md */
	__u32 ack;
	__u32 ifindex;
	char dev[16];       /* device name for EV_DEV_* */
	__u8 tcp_flags;
	__u8 old_state;
	__u8 tcp;           /* 1 when the TCP fields below were read */
	__u8 pad0;
	__s32 ret;          /* return value or error of the traced call */
	/* --- DEV_EVENT_SIZE: device events end here --- */
	__u32 pid;          /* tgid of the current task */
	__u32 tid;
	char comm[16];
	__u32 snd_cwnd;
	__u32 ssthresh;
	__u32 srtt_us;
	__u32 rttvar_us;
	__u32 snd_wnd;
	__u32 rcv_wnd;
	__u32 snd_nxt;
	__u32 snd_una;
	__u32 packets_out;
	__u32 in_flight;
	__u32 total_retrans;
	__u8 pad1[4];
};

/* The default mode's per-socket aggregate, one per CPU in a per-CPU hash
 * keyed by socket cookie (crates/source/stack/src/interval.rs mirrors it).
 * Counters, sums and the histogram only grow: user space reads them every
 * interval and takes differences, so it never writes to a slot a program
 * may be adding to (zeroing after a read would lose what came between).
 * Minimum and maximum cannot be differenced: they are kept per interval,
 * in the half of `tcp_min`/`tcp_max` of the epoch's parity; user space
 * starts the next epoch before it reads the last one's half. */
#define TCP_METRICS 5   /* snd_cwnd, ssthresh, srtt_us, in_flight, snd_wnd */
#define DELAY_BUCKETS 32

struct sock_agg {
	/* Identity: written by the CPU that first uses its slot, and at state
	 * changes (a connecting socket has no local port yet at SYN_SENT). */
	__u32 netns;
	__u8 family;
	__u8 proto;
	__u8 state;         /* last TCP state seen */
	__u8 closed;        /* 1 once the socket reached CLOSE */
	__u8 laddr[16];
	__u8 raddr[16];
	__u16 lport;
	__u16 rport;
	__u32 pid;          /* last caller of send/recv on this CPU */
	__u32 tid;
	char comm[16];
	__u64 app_ts;       /* when pid was set: the latest CPU's wins */
	__u64 app_sent;     /* bytes the application wrote */
	__u64 app_writes;
	__u64 app_received; /* bytes it read */
	__u64 app_reads;
	__u64 dev_sent;     /* transport payload handed to a device */
	__u64 dev_frames_sent;
	__u64 dev_received; /* ... taken from a device (joined by 4-tuple) */
	__u64 dev_frames_received;
	__u64 segs_in;      /* incoming segments TCP processed (tcp_probe) */
	__u64 retransmits;
	__u64 retransmitted; /* sequence space retransmitted */
	__u64 state_changes;
	__u64 tcp_n;        /* TCP state samples (tcp_probe, send, recv) */
	__u64 tcp_last_ts;
	__u64 tcp_sum[TCP_METRICS];
	__u32 tcp_last[TCP_METRICS];
	__u32 pad2;
	__u64 mm_epoch[2];
	__u32 tcp_min[2][TCP_METRICS];
	__u32 tcp_max[2][TCP_METRICS];
	/* Write to transmission delay of sampled writes (see stack.bpf.c). */
	__u64 delay_n;
	__s64 delay_sum_ns;
	__u64 delay_hist[DELAY_BUCKETS]; /* [0]: <= 0 ns; [k]: [2^(k-1), 2^k) ns */
};

/* The walk level's view of one TCP socket: what the kernel itself keeps
 * per socket (tcp_info's counters and state), read by the iter/tcp walk
 * every interval and, for a socket at CLOSE, by the state-change program
 * (its final counters; `final` = 1). Counters only grow: user space takes
 * differences from walk to walk (crates/source/stack/src/walk.rs mirrors
 * this layout). */
#define WALK_HAVE_CHRONO 1 /* busy/limited times (the kernel's HZ known) */
#define WALK_HAVE_RTO 2    /* total_rto (kernels from 6.7) */
#define WALK_HAVE_START 4  /* write_seq0/copied_seq0: seen at ESTABLISHED */
#define WALK_FIRST 8       /* the socket's first record */

struct sock_walk {
	__u64 cookie;
	__u64 ts_ns;        /* bpf_ktime_get_ns at the read */
	__u32 netns;
	__u8 family;
	__u8 state;         /* TCP state */
	__u8 final;         /* 1: read at CLOSE, the socket's last counters */
	__u8 have;          /* WALK_HAVE_* */
	__u8 laddr[16];
	__u8 raddr[16];
	__u16 lport;
	__u16 rport;
	__u32 uid;          /* the iterator's socket owner uid (walks only) */
	__u64 bytes_sent;   /* payload sent, retransmissions included */
	__u64 bytes_received; /* sequence space received in order */
	__u64 bytes_acked;
	__u64 bytes_retrans;
	__u64 busy_us;      /* time with data in flight */
	__u64 rwnd_limited_us;
	__u64 sndbuf_limited_us;
	__u32 segs_in;      /* segments (GSO segments counted one by one) */
	__u32 segs_out;
	__u32 data_segs_in;
	__u32 data_segs_out;
	__u32 total_retrans;
	__u32 total_rto;
	__u32 write_seq;    /* end of what the application wrote */
	__u32 copied_seq;   /* end of what it read */
	__u32 snd_cwnd;
	__u32 ssthresh;
	__u32 srtt_us;
	__u32 rttvar_us;
	__u32 snd_wnd;
	__u32 rcv_wnd;
	__u32 packets_out;
	__u32 in_flight;
	__u32 mss_cache;
	__u32 rate_delivered;   /* delivery rate: rate_delivered segments ... */
	__u32 rate_interval_us; /* ... in this many µs */
	__u32 write_seq0;   /* write_seq and copied_seq at ESTABLISHED ... */
	__u32 copied_seq0;  /* ... (with WALK_HAVE_START) */
	__u32 pad1;
};

#define WALK_SIZE 208
_Static_assert(sizeof(struct sock_walk) == WALK_SIZE, "walk layout");

#define AGG_SIZE 624
_Static_assert(sizeof(struct sock_agg) == AGG_SIZE, "aggregate layout");

#define EVENT_SIZE 176
#define DEV_EVENT_SIZE 104
_Static_assert(sizeof(struct event) == EVENT_SIZE, "event layout");
_Static_assert(__builtin_offsetof(struct event, pid) == DEV_EVENT_SIZE, "device event layout");

#endif
