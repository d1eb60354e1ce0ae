-- Per window of ${every_ns} ns: the least, mean and greatest rate over its
-- samples of ${sample_ns} ns, in frames/s and bits/s. Samples without a
-- frame count as zero; a window holds ${first_sample}..${last_sample} only
-- where the data does. Windows start at ${origin_ns}.
WITH s AS (
  SELECT CAST(floor((ts_ns - ${origin_ns}) / ${sample_ns}) AS BIGINT) AS sample,
         count(*) AS frames,
         sum(wire_len) AS bytes
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
  SELECT w.*,
         least(${last_sample}, (win + 1) * ${samples_per_window} - 1)
           - greatest(${first_sample}, win * ${samples_per_window}) + 1 AS samples
  FROM w
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
