-- WHERE on tags, fields and time, over rows spread across two SSTs and the memtable. The
-- filter is pushed down into the engine scan; the answers must not depend on where rows live.

CREATE TABLE m (host string TAG, region string TAG, cpu double, mem double, req int64,
  ts timestamp NOT NULL, TIMESTAMP KEY(ts)) WITH (segment_duration='1h', num_rows_per_row_group='2');

INSERT INTO m (host, region, cpu, mem, req, ts) VALUES
  ('a', 'eu', 10.0, 1.5, 100, '2024-01-01 00:00:00'),
  ('a', 'eu', 20.0, NULL, 200, '2024-01-01 00:30:00'),
  ('b', 'eu', 5.0, 0.5, 10, '2024-01-01 00:00:00'),
  ('b', 'eu', 15.0, 1.0, 20, '2024-01-01 00:45:00'),
  ('c', 'us', 50.0, 4.0, 5, '2024-01-01 00:15:00'),
  ('d', 'ap', 0.0, 0.0, 0, '2024-01-01 00:10:00');
-- flush
INSERT INTO m (host, region, cpu, mem, req, ts) VALUES
  ('a', 'eu', NULL, 2.5, 300, '2024-01-01 01:00:00'),
  ('b', 'eu', 25.0, NULL, 30, '2024-01-01 01:15:00'),
  ('c', 'us', NULL, NULL, 7, '2024-01-01 01:45:00');
-- flush
INSERT INTO m (host, region, cpu, mem, req, ts) VALUES
  ('a', 'eu', 40.0, 3.5, NULL, '2024-01-01 01:30:00'),
  ('c', 'us', 60.0, 5.0, 9, '2024-01-01 02:00:00');

SELECT host, region, cpu, mem, req, ts FROM m ORDER BY host, ts;
-- expect
host | region | cpu  | mem  | req  | ts
a    | eu     | 10.0 | 1.5  | 100  | 2024-01-01T00:00:00
a    | eu     | 20.0 | NULL | 200  | 2024-01-01T00:30:00
a    | eu     | NULL | 2.5  | 300  | 2024-01-01T01:00:00
a    | eu     | 40.0 | 3.5  | NULL | 2024-01-01T01:30:00
b    | eu     | 5.0  | 0.5  | 10   | 2024-01-01T00:00:00
b    | eu     | 15.0 | 1.0  | 20   | 2024-01-01T00:45:00
b    | eu     | 25.0 | NULL | 30   | 2024-01-01T01:15:00
c    | us     | 50.0 | 4.0  | 5    | 2024-01-01T00:15:00
c    | us     | NULL | NULL | 7    | 2024-01-01T01:45:00
c    | us     | 60.0 | 5.0  | 9    | 2024-01-01T02:00:00
d    | ap     | 0.0  | 0.0  | 0    | 2024-01-01T00:10:00

SELECT host, ts, cpu FROM m WHERE host = 'a' ORDER BY ts;
-- expect
host | ts                  | cpu
a    | 2024-01-01T00:00:00 | 10.0
a    | 2024-01-01T00:30:00 | 20.0
a    | 2024-01-01T01:00:00 | NULL
a    | 2024-01-01T01:30:00 | 40.0

SELECT host, ts FROM m WHERE host <> 'a' AND region = 'eu' ORDER BY ts;
-- expect
host | ts
b    | 2024-01-01T00:00:00
b    | 2024-01-01T00:45:00
b    | 2024-01-01T01:15:00

SELECT host, count(*) AS n FROM m WHERE host IN ('a', 'c', 'zz') GROUP BY host ORDER BY host;
-- expect
host | n
a    | 4
c    | 3

SELECT host, ts FROM m WHERE host NOT IN ('a', 'b') ORDER BY host, ts;
-- expect
host | ts
c    | 2024-01-01T00:15:00
c    | 2024-01-01T01:45:00
c    | 2024-01-01T02:00:00
d    | 2024-01-01T00:10:00

-- Comparisons with NULL are not true: rows without cpu drop out.
SELECT host, cpu FROM m WHERE cpu > 20 ORDER BY cpu;
-- expect
host | cpu
b    | 25.0
a    | 40.0
c    | 50.0
c    | 60.0

-- No ORDER BY: rows are compared sorted.
SELECT host, ts FROM m WHERE cpu IS NULL;
-- expect rowsort
host | ts
a    | 2024-01-01T01:00:00
c    | 2024-01-01T01:45:00

SELECT host, cpu FROM m WHERE cpu IS NOT NULL AND mem IS NULL ORDER BY host;
-- expect
host | cpu
a    | 20.0
b    | 25.0

-- NOT of an unknown comparison is still unknown.
SELECT host, cpu FROM m WHERE NOT (cpu > 10) ORDER BY cpu;
-- expect
host | cpu
d    | 0.0
b    | 5.0
a    | 10.0

SELECT host, cpu, mem FROM m WHERE cpu > 30 OR mem < 1 ORDER BY host, ts;
-- expect
host | cpu  | mem
a    | 40.0 | 3.5
b    | 5.0  | 0.5
c    | 50.0 | 4.0
c    | 60.0 | 5.0
d    | 0.0  | 0.0

-- Time ranges: timestamp strings, half open.
SELECT host, ts FROM m WHERE ts >= '2024-01-01 01:00:00' AND ts < '2024-01-01 02:00:00'
  ORDER BY ts;
-- expect
host | ts
a    | 2024-01-01T01:00:00
b    | 2024-01-01T01:15:00
a    | 2024-01-01T01:30:00
c    | 2024-01-01T01:45:00

-- Integer milliseconds stand for timestamps (1704067200000 = 2024-01-01 00:00:00 UTC),
-- in BETWEEN (inclusive) and on either side of a comparison.
SELECT host, ts FROM m WHERE ts BETWEEN 1704067200000 AND 1704069000000 ORDER BY ts, host;
-- expect
host | ts
a    | 2024-01-01T00:00:00
b    | 2024-01-01T00:00:00
d    | 2024-01-01T00:10:00
c    | 2024-01-01T00:15:00
a    | 2024-01-01T00:30:00

SELECT host, ts FROM m WHERE ts NOT BETWEEN 1704067200000 AND 1704074399999 ORDER BY ts;
-- expect
host | ts
c    | 2024-01-01T02:00:00

SELECT host, ts FROM m WHERE ts IN (1704067200000, 1704074400000) ORDER BY ts, host;
-- expect
host | ts
a    | 2024-01-01T00:00:00
b    | 2024-01-01T00:00:00
c    | 2024-01-01T02:00:00

SELECT count(*) AS n FROM m WHERE ts NOT IN (1704067200000, 1704074400000);
-- expect
n
8

SELECT host, ts FROM m WHERE 1704074400000 <= ts;
-- expect
host | ts
c    | 2024-01-01T02:00:00

SELECT host, ts FROM m WHERE host = 'a' AND ts > 1704069000000 ORDER BY ts;
-- expect
host | ts
a    | 2024-01-01T01:00:00
a    | 2024-01-01T01:30:00

SELECT host, region, count(*) AS n FROM m WHERE host LIKE 'a%' OR region LIKE '_s'
  GROUP BY host, region ORDER BY host;
-- expect
host | region | n
a    | eu     | 4
c    | us     | 3

SELECT host, req FROM m WHERE req BETWEEN 10 AND 200 ORDER BY req;
-- expect
host | req
b    | 10
b    | 20
b    | 30
a    | 100
a    | 200

-- Arithmetic in filters.
SELECT host, cpu, mem FROM m WHERE cpu = mem * 10 ORDER BY host;
-- expect
host | cpu | mem
b    | 5.0 | 0.5
d    | 0.0 | 0.0

SELECT host, ts FROM m WHERE cpu / 10 > mem ORDER BY host, ts;
-- expect
host | ts
a    | 2024-01-01T01:30:00
b    | 2024-01-01T00:45:00
c    | 2024-01-01T00:15:00
c    | 2024-01-01T02:00:00

SELECT host, ts FROM m WHERE coalesce(cpu, -1) < 0 ORDER BY host;
-- expect
host | ts
a    | 2024-01-01T01:00:00
c    | 2024-01-01T01:45:00

-- Tag values compare case-sensitively; nothing matches.
SELECT host FROM m WHERE region = 'EU';
-- expect
host

SELECT host, ts FROM m WHERE host IN (SELECT host FROM m WHERE cpu > 45) ORDER BY ts;
-- expect
host | ts
c    | 2024-01-01T00:15:00
c    | 2024-01-01T01:45:00
c    | 2024-01-01T02:00:00

-- A filter on a tag after a flush of everything gives the same rows.
-- flush
SELECT host, ts, cpu FROM m WHERE host = 'a' AND (cpu IS NULL OR cpu >= 40) ORDER BY ts;
-- expect
host | ts                  | cpu
a    | 2024-01-01T01:00:00 | NULL
a    | 2024-01-01T01:30:00 | 40.0

-- Contradictions: DataFusion folds them to the literal false, which must mean no rows
-- (alone, and next to other conditions pushed into the same scan).
SELECT host FROM m WHERE host = 'a' AND host = 'b';
-- expect
host

SELECT count(*) AS n FROM m WHERE (host = 'a' AND host = 'b') AND region = 'eu';
-- expect
n
0

SELECT x.host, y.cpu FROM m x LEFT JOIN m y ON x.host = y.host AND x.ts = y.ts
  AND y.host IN ('a') AND y.host IN ('b') WHERE x.cpu >= 50 ORDER BY x.ts;
-- expect
host | cpu
c    | NULL
c    | NULL
