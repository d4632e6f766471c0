-- Queries beyond a single-table scan: joins, CTEs, set operations, subqueries, window
-- functions, expressions and operators (||, ::, %, ~, arrays), queries without a table.

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

CREATE TABLE hosts (host string NOT NULL, owner string, cores int32, ts timestamp NOT NULL,
  PRIMARY KEY(host, ts), TIMESTAMP KEY(ts));
INSERT INTO hosts (host, owner, cores, ts) VALUES ('a', 'ops', 4, 0), ('b', 'dev', 8, 0),
  ('c', 'ops', 16, 0), ('e', 'qa', 2, 0);

SELECT h.owner, count(*) AS n, sum(m.cpu) AS s FROM m JOIN hosts h ON m.host = h.host
  GROUP BY h.owner ORDER BY h.owner;
-- expect
owner | n | s
dev   | 3 | 45.0
ops   | 7 | 180.0

SELECT h.host, count(m.ts) AS n FROM hosts h LEFT JOIN m ON m.host = h.host GROUP BY h.host
  ORDER BY h.host;
-- expect
host | n
a    | 4
b    | 3
c    | 3
e    | 0

SELECT DISTINCT m.host FROM m LEFT JOIN hosts h ON m.host = h.host WHERE h.host IS NULL;
-- expect
host
d

SELECT host FROM hosts h WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.host = h.host);
-- expect
host
e

WITH per_host AS (SELECT host, max(cpu) AS peak FROM m GROUP BY host)
SELECT host, peak FROM per_host WHERE peak > 30 ORDER BY host;
-- expect
host | peak
a    | 40.0
c    | 60.0

SELECT host, 'metric' AS src FROM m WHERE cpu > 45
UNION ALL
SELECT host, 'owner' FROM hosts WHERE cores > 4
ORDER BY host, src;
-- expect
host | src
b    | owner
c    | metric
c    | metric
c    | owner

SELECT host FROM m UNION SELECT host FROM hosts ORDER BY host;
-- expect
host
a
b
c
d
e

SELECT host, cpu FROM m WHERE cpu = (SELECT max(cpu) FROM m);
-- expect
host | cpu
c    | 60.0

-- A table alias and qualified columns, with an integer-millisecond time bound.
SELECT x.host, x.ts FROM m AS x WHERE x.ts > 1704074000000;
-- expect
host | ts
c    | 2024-01-01T02:00:00

SELECT host || '-' || region AS id, upper(host) AS h, length(region) AS len,
  coalesce(mem, -1.0) AS mem FROM m WHERE ts = '2024-01-01 00:30:00';
-- expect
id   | h | len | mem
a-eu | A | 2   | -1.0

SELECT req::double / 3 AS third, req / 7 AS int_div, req % 7 AS r, CAST(cpu AS bigint) AS icpu
  FROM m WHERE host = 'b' ORDER BY ts;
-- expect
third              | int_div | r | icpu
3.3333333333333335 | 1       | 3 | 5
6.666666666666667  | 2       | 6 | 15
10.0               | 4       | 2 | 25

SELECT count(*) AS n FROM m WHERE host ~ '^[ab]$';
-- expect
n
7

SELECT count(*) AS n FROM m WHERE mem IS DISTINCT FROM 1.0;
-- expect
n
10

SELECT host, ts, sum(cpu) OVER (PARTITION BY host ORDER BY ts) AS running FROM m
  WHERE host = 'a' ORDER BY ts;
-- expect
host | ts                  | running
a    | 2024-01-01T00:00:00 | 10.0
a    | 2024-01-01T00:30:00 | 30.0
a    | 2024-01-01T01:00:00 | 30.0
a    | 2024-01-01T01:30:00 | 70.0

SELECT ts, cpu - lag(cpu) OVER (PARTITION BY host ORDER BY ts) AS delta FROM m
  WHERE host = 'b' ORDER BY ts;
-- expect
ts                  | delta
2024-01-01T00:00:00 | NULL
2024-01-01T00:45:00 | 10.0
2024-01-01T01:15:00 | 10.0

SELECT 1 + 2 * 3 AS n, 'a' || 'b' AS ab, 7 % 3 AS m, [1, 2, 3] AS xs, make_array('x', 'y') AS ys;
-- expect
n | ab | m | xs        | ys
7 | ab | 1 | [1, 2, 3] | [x, y]

VALUES (1, 'x'), (2, NULL);
-- expect
column1 | column2
1       | x
2       | NULL

-- Comments inside a query are fine.
SELECT /* the hosts */ host -- of region us
  FROM m WHERE region = 'us' GROUP BY host;
-- expect
host
c
