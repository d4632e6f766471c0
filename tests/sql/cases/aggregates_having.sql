-- Aggregates (count/sum/min/max/avg and friends) with GROUP BY on tags and expressions, and
-- HAVING. The data spans two SSTs and the memtable.

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

SELECT count(*) AS n, count(cpu) AS n_cpu, sum(cpu) AS s, min(cpu) AS lo, max(cpu) AS hi,
  avg(cpu) AS mean, sum(req) AS total_req, count(req) AS n_req, avg(req) AS mean_req FROM m;
-- expect
n  | n_cpu | s     | lo  | hi   | mean | total_req | n_req | mean_req
11 | 9     | 225.0 | 0.0 | 60.0 | 25.0 | 681       | 10    | 68.1

SELECT host, count(*) AS n, count(cpu) AS n_cpu, sum(cpu) AS s, min(cpu) AS lo,
  max(cpu) AS hi, avg(cpu) AS mean FROM m GROUP BY host ORDER BY host;
-- expect
host | n | n_cpu | s     | lo   | hi   | mean
a    | 4 | 3     | 70.0  | 10.0 | 40.0 | 23.333333333333332
b    | 3 | 3     | 45.0  | 5.0  | 25.0 | 15.0
c    | 3 | 2     | 110.0 | 50.0 | 60.0 | 55.0
d    | 1 | 1     | 0.0   | 0.0  | 0.0  | 0.0

SELECT host, sum(mem) AS s, avg(mem) AS mean, sum(req) AS r, avg(req) AS mean_r FROM m
  GROUP BY host ORDER BY host;
-- expect
host | s   | mean | r   | mean_r
a    | 7.5 | 2.5  | 600 | 200.0
b    | 1.5 | 0.75 | 60  | 20.0
c    | 9.0 | 4.5  | 21  | 7.0
d    | 0.0 | 0.0  | 0   | 0.0

SELECT region, count(*) AS n, avg(cpu) AS mean FROM m GROUP BY region ORDER BY region;
-- expect
region | n | mean
ap     | 1 | 0.0
eu     | 7 | 19.166666666666668
us     | 3 | 55.0

SELECT region, host, min(ts) AS first, max(ts) AS last FROM m GROUP BY region, host
  ORDER BY region, host;
-- expect
region | host | first               | last
ap     | d    | 2024-01-01T00:10:00 | 2024-01-01T00:10:00
eu     | a    | 2024-01-01T00:00:00 | 2024-01-01T01:30:00
eu     | b    | 2024-01-01T00:00:00 | 2024-01-01T01:15:00
us     | c    | 2024-01-01T00:15:00 | 2024-01-01T02:00:00

SELECT host, count(cpu) AS n_cpu FROM m GROUP BY host HAVING count(cpu) >= 3 ORDER BY host;
-- expect
host | n_cpu
a    | 3
b    | 3

SELECT host, sum(req) AS r FROM m GROUP BY host HAVING sum(req) > 50 ORDER BY r DESC;
-- expect
host | r
a    | 600
b    | 60

SELECT host FROM m GROUP BY host HAVING avg(cpu) > 20 AND max(mem) < 5 ORDER BY host;
-- expect
host
a

-- HAVING on an aggregate that is not selected.
SELECT region FROM m GROUP BY region HAVING count(DISTINCT host) > 1;
-- expect
region
eu

SELECT count(DISTINCT region) AS regions, count(DISTINCT host) AS hosts,
  approx_distinct(host) AS approx_hosts FROM m;
-- expect
regions | hosts | approx_hosts
3       | 4     | 4

-- Arithmetic on aggregates.
SELECT host, sum(cpu) / count(cpu) AS mean, max(cpu) - min(cpu) AS spread FROM m
  WHERE host IN ('a', 'c') GROUP BY host ORDER BY host;
-- expect
host | mean               | spread
a    | 23.333333333333332 | 30.0
c    | 55.0               | 10.0

-- Grouping by an expression.
SELECT CASE WHEN cpu IS NULL THEN 'none' WHEN cpu >= 20 THEN 'high' ELSE 'low' END AS level,
  count(*) AS n FROM m GROUP BY level ORDER BY level;
-- expect
level | n
high  | 5
low   | 4
none  | 2

SELECT median(cpu) AS med FROM m;
-- expect
med
20.0

-- The latest value of each series.
SELECT host, last_value(cpu ORDER BY ts) AS latest, first_value(req ORDER BY ts) AS first_req
  FROM m GROUP BY host ORDER BY host;
-- expect
host | latest | first_req
a    | 40.0   | 100
b    | 25.0   | 10
c    | 60.0   | 5
d    | 0.0    | 0

-- Over no rows: count is 0, the others NULL; grouped, there are no groups.
SELECT count(*) AS n, sum(cpu) AS s, max(cpu) AS hi, avg(cpu) AS mean FROM m WHERE host = 'zz';
-- expect
n | s    | hi   | mean
0 | NULL | NULL | NULL

SELECT host, count(*) AS n FROM m WHERE host = 'zz' GROUP BY host;
-- expect
host | n

-- Only the newest version of an overwritten row is aggregated.
INSERT INTO m (host, region, cpu, ts) VALUES ('b', 'eu', 105.0, '2024-01-01 00:00:00');
-- expect affected 1

SELECT host, count(*) AS n, sum(cpu) AS s, count(mem) AS n_mem FROM m WHERE host = 'b'
  GROUP BY host;
-- expect
host | n | s     | n_mem
b    | 3 | 145.0 | 1

-- flush
-- compact m

SELECT count(*) AS n, sum(cpu) AS s FROM m;
-- expect
n  | s
11 | 325.0
