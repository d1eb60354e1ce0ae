-- Per window of ${every_ns} ns, each of the ${windows} windows from
-- ${origin_ns} (the span's, empty ones included): the least, mean and
-- greatest rate over its samples of ${sample_ns} ns, in frames/s and
-- bits/s. Samples and windows without a frame count as zero; a window
-- holds samples ${first_sample}..${last_sample} only where the span does.
WITH s AS (
  SELECT CAST(floor((ts_ns - ${origin_ns}) / ${sample_ns}) AS BIGINT) AS sample,
         count(*) AS frames,
         CAST(sum(wire_len) AS BIGINT) AS bytes
  FROM packets
  GROUP BY CAST(floor((ts_ns - ${origin_ns}) / ${sample_ns}) AS BIGINT)
),
w AS (
  SELECT CAST(floor(sample / ${samples_per_window}) AS BIGINT) AS win,
         count(*) AS busy,
         min(frames) AS min_frames, max(frames) AS max_frames, sum(frames) AS frames,
         min(bytes) AS min_bytes, max(bytes) AS max_bytes, sum(bytes) AS bytes
  FROM s
  GROUP BY CAST(floor(sample / ${samples_per_window}) AS BIGINT)
),
n AS (
  SELECT r.win,
         least(${last_sample}, (r.win + 1) * ${samples_per_window} - 1)
           - greatest(${first_sample}, r.win * ${samples_per_window}) + 1 AS samples,
         coalesce(w.busy, 0) AS busy,
         coalesce(w.min_frames, 0) AS min_frames,
         coalesce(w.max_frames, 0) AS max_frames,
         coalesce(w.frames, 0) AS frames,
         coalesce(w.min_bytes, 0) AS min_bytes,
         coalesce(w.max_bytes, 0) AS max_bytes,
         coalesce(w.bytes, 0) AS bytes
  FROM range(0, ${windows}) AS r(win)
  LEFT JOIN w ON w.win = r.win
)
SELECT ${origin_ns} + win * ${every_ns} AS start_ns,
       samples,
       frames,
       bytes,
       CASE WHEN busy < samples THEN 0 ELSE min_frames END * ${per_second} AS min_fps,
       frames * ${per_second} / samples AS mean_fps,
       max_frames * ${per_second} AS max_fps,
       CASE WHEN busy < samples THEN 0 ELSE min_bytes END * 8 * ${per_second} AS min_bps,
       bytes * 8 * ${per_second} / samples AS mean_bps,
       max_bytes * 8 * ${per_second} AS max_bps
FROM n
ORDER BY start_ns
