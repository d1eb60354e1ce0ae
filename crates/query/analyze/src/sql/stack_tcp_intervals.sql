-- stack_tcp.sql's timeline from the default mode's intervals: per interval
-- of the given sockets, the last congestion window, ssthresh, in-flight
-- and send window sampled, and the mean smoothed RTT.
SELECT cookie, ts_ns, cwnd_last AS snd_cwnd, ssthresh_last AS ssthresh,
       srtt_us_mean AS srtt_us, in_flight_last AS in_flight, snd_wnd_last AS snd_wnd
FROM stack_intervals
WHERE tcp_samples > 0 AND cookie IN (${cookies})
ORDER BY cookie, ts_ns
