-- TCP state over time of the given sockets, from every incoming segment
-- (tcp_probe): congestion window, round-trip time, segments in flight.
SELECT cookie, ts_ns, snd_cwnd, ssthresh, srtt_us, in_flight, snd_wnd
FROM stack
WHERE event = 'tcp_probe' AND cookie IN (${cookies})
ORDER BY cookie, ts_ns
