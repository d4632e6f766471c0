-- Time functions: DataFusion's date_bin / date_trunc / date_part and interval arithmetic, and
-- gnomon's time_bucket(ts, period). Buckets are aligned to the epoch (date_bin unless given
-- another origin), also before 1970, and keep millisecond precision.

CREATE TABLE tf (host string TAG, v int64, ts timestamp NOT NULL, TIMESTAMP KEY(ts))
  WITH (segment_duration='1d');

INSERT INTO tf (host, v, ts) VALUES
  ('a', 1, '2024-01-01 00:00:00'),
  ('a', 2, '2024-01-01 00:07:30'),
  ('a', 3, '2024-01-01 00:14:59.999'),
  ('a', 4, '2024-01-01 00:15:00');
-- flush
INSERT INTO tf (host, v, ts) VALUES
  ('a', 5, '2024-01-01 00:59:00'),
  ('a', 6, '2024-01-01 01:00:00'),
  ('a', 7, '2024-01-01 23:59:59'),
  ('a', 8, '2024-01-02 00:00:00.123'),
  ('b', 10, -1000),
  ('b', 20, 0);

SELECT date_bin(interval '15 minutes', ts) AS b, count(*) AS n, sum(v) AS s FROM tf
  WHERE host = 'a' GROUP BY b ORDER BY b;
-- expect
b                   | n | s
2024-01-01T00:00:00 | 3 | 6
2024-01-01T00:15:00 | 1 | 4
2024-01-01T00:45:00 | 1 | 5
2024-01-01T01:00:00 | 1 | 6
2024-01-01T23:45:00 | 1 | 7
2024-01-02T00:00:00 | 1 | 8

SELECT time_bucket(ts, 'PT1H') AS b, count(*) AS n, sum(v) AS s FROM tf WHERE host = 'a'
  GROUP BY b ORDER BY b;
-- expect
b                   | n | s
2024-01-01T00:00:00 | 5 | 15
2024-01-01T01:00:00 | 1 | 6
2024-01-01T23:00:00 | 1 | 7
2024-01-02T00:00:00 | 1 | 8

-- Short durations work as periods too.
SELECT time_bucket(ts, '15m') AS b, count(*) AS n FROM tf WHERE host = 'a'
  AND ts < '2024-01-01 01:00:00' GROUP BY b ORDER BY b;
-- expect
b                   | n
2024-01-01T00:00:00 | 3
2024-01-01T00:15:00 | 1
2024-01-01T00:45:00 | 1

SELECT time_bucket(ts, 'P1D') AS day, count(*) AS n, sum(v) AS s FROM tf GROUP BY day
  ORDER BY day;
-- expect
day                 | n | s
1969-12-31T00:00:00 | 1 | 10
1970-01-01T00:00:00 | 1 | 20
2024-01-01T00:00:00 | 7 | 28
2024-01-02T00:00:00 | 1 | 8

-- date_bin agrees with time_bucket on days.
SELECT date_bin(interval '1 day', ts) AS day, count(*) AS n, sum(v) AS s FROM tf GROUP BY day
  ORDER BY day;
-- expect
day                 | n | s
1969-12-31T00:00:00 | 1 | 10
1970-01-01T00:00:00 | 1 | 20
2024-01-01T00:00:00 | 7 | 28
2024-01-02T00:00:00 | 1 | 8

-- Before the epoch buckets round down, not towards zero.
SELECT ts, date_bin(interval '1 minute', ts) AS b1, time_bucket(ts, 'PT1M') AS b2 FROM tf
  WHERE host = 'b' ORDER BY ts;
-- expect
ts                  | b1                  | b2
1969-12-31T23:59:59 | 1969-12-31T23:59:00 | 1969-12-31T23:59:00
1970-01-01T00:00:00 | 1970-01-01T00:00:00 | 1970-01-01T00:00:00

-- date_bin with its own origin: hours starting at half past.
SELECT date_bin(interval '1 hour', ts, TIMESTAMP '2024-01-01 00:30:00') AS b, count(*) AS n
  FROM tf WHERE host = 'a' GROUP BY b ORDER BY b;
-- expect
b                   | n
2023-12-31T23:30:00 | 4
2024-01-01T00:30:00 | 2
2024-01-01T23:30:00 | 2

-- Millisecond precision is kept.
SELECT ts, date_bin(interval '100 milliseconds', ts) AS b FROM tf
  WHERE ts > '2024-01-01 23:59:59';
-- expect
ts                      | b
2024-01-02T00:00:00.123 | 2024-01-02T00:00:00.100

SELECT ts, date_trunc('hour', ts) AS h, date_part('minute', ts) AS mi FROM tf WHERE host = 'a'
  ORDER BY ts LIMIT 3;
-- expect
ts                      | h                   | mi
2024-01-01T00:00:00     | 2024-01-01T00:00:00 | 0
2024-01-01T00:07:30     | 2024-01-01T00:00:00 | 7
2024-01-01T00:14:59.999 | 2024-01-01T00:00:00 | 14

SELECT host, ts + interval '90 minutes' AS later FROM tf WHERE host = 'b' ORDER BY ts;
-- expect
host | later
b    | 1970-01-01T01:29:59
b    | 1970-01-01T01:30:00

SELECT to_timestamp_millis(1704067200000) AS t;
-- expect
t
2024-01-01T00:00:00

SELECT count(*) AS n FROM tf WHERE ts >= TIMESTAMP '2024-01-01 01:00:00';
-- expect
n
3

-- The average of each host per day, only for days with more than one row.
SELECT host, time_bucket(ts, 'P1D') AS day, avg(v) AS mean FROM tf GROUP BY host, day
  HAVING count(*) > 1 ORDER BY host, day;
-- expect
host | day                 | mean
a    | 2024-01-01T00:00:00 | 4.0

SELECT time_bucket(ts, 'sometimes') AS b FROM tf;
-- expect error InvalidArgument: invalid time_bucket period 'sometimes'

SELECT time_bucket(ts, 'PT0S') AS b FROM tf;
-- expect error InvalidArgument: must be positive
