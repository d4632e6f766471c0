-- ORDER BY (directions, NULL placement, expressions, positions, aliases) with LIMIT/OFFSET.
-- Every ORDER BY here is total, so the expected order is the only right one.

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

-- Ascending puts NULLs last by default.
SELECT host, ts, cpu FROM m ORDER BY cpu, host, ts;
-- expect
host | ts                  | cpu
d    | 2024-01-01T00:10:00 | 0.0
b    | 2024-01-01T00:00:00 | 5.0
a    | 2024-01-01T00:00:00 | 10.0
b    | 2024-01-01T00:45:00 | 15.0
a    | 2024-01-01T00:30:00 | 20.0
b    | 2024-01-01T01:15:00 | 25.0
a    | 2024-01-01T01:30:00 | 40.0
c    | 2024-01-01T00:15:00 | 50.0
c    | 2024-01-01T02:00:00 | 60.0
a    | 2024-01-01T01:00:00 | NULL
c    | 2024-01-01T01:45:00 | NULL

-- Descending puts them first.
SELECT host, cpu FROM m ORDER BY cpu DESC, host;
-- expect
host | cpu
a    | NULL
c    | NULL
c    | 60.0
c    | 50.0
a    | 40.0
b    | 25.0
a    | 20.0
b    | 15.0
a    | 10.0
b    | 5.0
d    | 0.0

SELECT host, cpu FROM m ORDER BY cpu DESC NULLS LAST, host LIMIT 3;
-- expect
host | cpu
c    | 60.0
c    | 50.0
a    | 40.0

SELECT host, cpu FROM m ORDER BY cpu ASC NULLS FIRST, host LIMIT 4;
-- expect
host | cpu
a    | NULL
c    | NULL
d    | 0.0
b    | 5.0

SELECT host, ts FROM m ORDER BY ts, host LIMIT 2;
-- expect
host | ts
a    | 2024-01-01T00:00:00
b    | 2024-01-01T00:00:00

SELECT host, ts FROM m ORDER BY ts DESC, host LIMIT 3 OFFSET 2;
-- expect
host | ts
a    | 2024-01-01T01:30:00
b    | 2024-01-01T01:15:00
a    | 2024-01-01T01:00:00

SELECT host, ts FROM m ORDER BY ts DESC, host OFFSET 9;
-- expect
host | ts
a    | 2024-01-01T00:00:00
b    | 2024-01-01T00:00:00

SELECT host FROM m ORDER BY host LIMIT 0;
-- expect
host

-- An expression as the sort key.
SELECT host, req FROM m ORDER BY req % 100, host, ts;
-- expect
host | req
a    | 100
a    | 200
a    | 300
d    | 0
c    | 5
c    | 7
c    | 9
b    | 10
b    | 20
b    | 30
a    | NULL

-- By output position and by alias.
SELECT host, max(cpu) AS top FROM m GROUP BY host ORDER BY 2 DESC;
-- expect
host | top
c    | 60.0
a    | 40.0
b    | 25.0
d    | 0.0

SELECT host, max(cpu) AS top FROM m GROUP BY host ORDER BY top;
-- expect
host | top
d    | 0.0
b    | 25.0
a    | 40.0
c    | 60.0

SELECT DISTINCT region FROM m ORDER BY region DESC;
-- expect
region
us
eu
ap

-- The latest row of every series, with a window function.
SELECT host, ts, cpu FROM (
  SELECT host, ts, cpu, row_number() OVER (PARTITION BY host ORDER BY ts DESC) AS rn FROM m
) WHERE rn = 1 ORDER BY host;
-- expect
host | ts                  | cpu
a    | 2024-01-01T01:30:00 | 40.0
b    | 2024-01-01T01:15:00 | 25.0
c    | 2024-01-01T02:00:00 | 60.0
d    | 2024-01-01T00:10:00 | 0.0

-- Strings sort by code point: upper case before lower case.
INSERT INTO m (host, region, cpu, ts) VALUES ('Z', 'eu', 1.0, '2024-01-01 00:00:00'),
  ('a b', 'eu', 1.0, '2024-01-01 00:00:00'), ('ä', 'eu', 1.0, '2024-01-01 00:00:00');
-- expect affected 3

SELECT DISTINCT host FROM m ORDER BY host;
-- expect
host
Z
a
a b
b
c
d
ä

-- flush
-- The same ordered query on flushed data only.
SELECT host, ts FROM m WHERE region = 'eu' ORDER BY ts DESC, host DESC LIMIT 4;
-- expect
host | ts
a    | 2024-01-01T01:30:00
b    | 2024-01-01T01:15:00
a    | 2024-01-01T01:00:00
b    | 2024-01-01T00:45:00
