-- DELETE ... WHERE: the matching rows' keys get deletion markers, wherever the rows live
-- (memtable or SSTs); the affected count is the number of rows matched. Deleted rows stay
-- deleted through flush, compaction and reopen; a later write of the same key is visible.

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

-- One of the two rows is in an SST, the other in the memtable.
DELETE FROM m WHERE host = 'a' AND ts >= '2024-01-01 01:00:00';
-- expect affected 2

SELECT host, ts FROM m WHERE host = 'a' ORDER BY ts;
-- expect
host | ts
a    | 2024-01-01T00:00:00
a    | 2024-01-01T00:30:00

DELETE FROM m WHERE cpu IS NULL;
-- expect affected 1

DELETE FROM m WHERE cpu > 1000;
-- expect affected 0

-- Integer milliseconds in the condition, as in queries (1704068100000 = 00:15).
DELETE FROM m WHERE region = 'us' AND ts <= 1704068100000;
-- expect affected 1

DELETE FROM m WHERE host IN ('x', 'd') OR (host = 'b' AND mem < 0.75);
-- expect affected 2

SELECT host, ts, cpu FROM m ORDER BY host, ts;
-- expect
host | ts                  | cpu
a    | 2024-01-01T00:00:00 | 10.0
a    | 2024-01-01T00:30:00 | 20.0
b    | 2024-01-01T00:45:00 | 15.0
b    | 2024-01-01T01:15:00 | 25.0
c    | 2024-01-01T02:00:00 | 60.0

-- Deleting what is already gone matches nothing.
DELETE FROM m WHERE host = 'd';
-- expect affected 0

DELETE FROM m WHERE host = 'a' AND host = 'b';
-- expect affected 0

-- flush

SELECT count(*) AS n, sum(cpu) AS s FROM m;
-- expect
n | s
5 | 130.0

-- Writing a deleted key again brings the row back, with the new values only.
INSERT INTO m (host, region, cpu, ts) VALUES ('a', 'eu', 99.0, '2024-01-01 01:00:00');
-- expect affected 1

SELECT host, cpu, mem, req FROM m WHERE ts = '2024-01-01 01:00:00';
-- expect
host | cpu  | mem  | req
a    | 99.0 | NULL | NULL

-- flush
-- compact m

SELECT host, ts, cpu FROM m ORDER BY host, ts;
-- expect
host | ts                  | cpu
a    | 2024-01-01T00:00:00 | 10.0
a    | 2024-01-01T00:30:00 | 20.0
a    | 2024-01-01T01:00:00 | 99.0
b    | 2024-01-01T00:45:00 | 15.0
b    | 2024-01-01T01:15:00 | 25.0
c    | 2024-01-01T02:00:00 | 60.0

-- reopen

SELECT count(*) AS n FROM m;
-- expect
n
6

-- Without WHERE every row goes.
DELETE FROM m;
-- expect affected 6

SELECT count(*) AS n FROM m;
-- expect
n
0

-- reopen

SELECT count(*) AS n FROM m;
-- expect
n
0

INSERT INTO m (host, region, cpu, ts) VALUES ('a', 'eu', 1.0, '2024-01-01 00:00:00');
-- expect affected 1

SELECT host, cpu FROM m;
-- expect
host | cpu
a    | 1.0

-- A table with an explicit primary key and a case-sensitive name.
CREATE TABLE `KV` (name string NOT NULL, value int64, ts timestamp NOT NULL,
  PRIMARY KEY(name, ts), TIMESTAMP KEY(ts));
INSERT INTO `KV` (name, value, ts) VALUES ('k1', 1, 10), ('k2', -2, 10), ('k1', -3, 20);
-- flush

DELETE FROM `KV` WHERE value < 0;
-- expect affected 2

SELECT name, value, ts FROM "KV";
-- expect
name | value | ts
k1   | 1     | 1970-01-01T00:00:00.010

-- APPEND tables: a key may hold several rows, and a deletion removes a key with all its rows.
CREATE TABLE log (src string TAG, msg string, ts timestamp NOT NULL, TIMESTAMP KEY(ts))
  WITH (update_mode='APPEND');
INSERT INTO log (src, msg, ts) VALUES ('x', 'one', 1), ('x', 'two', 1), ('x', 'three', 2),
  ('y', 'four', 1);
-- flush
INSERT INTO log (src, msg, ts) VALUES ('x', 'five', 2);

-- A WHERE on a field that picks only some rows of a key is refused, and nothing changes.
DELETE FROM log WHERE msg = 'one';
-- expect error InvalidArgument: matches 1 of the 2 rows sharing its keys
SELECT count(*) AS n FROM log;
-- expect
n
5

-- A WHERE that takes whole keys deletes them, every duplicate included.
DELETE FROM log WHERE src = 'x' AND ts = 2;
-- expect affected 2
DELETE FROM log WHERE msg IN ('one', 'two');
-- expect affected 2
SELECT src, msg FROM log ORDER BY src, msg;
-- expect
src | msg
y   | four
