-- DEFAULT computed from the row (HoraeDB's DEFAULT c1 + 1): from the columns declared
-- before it, written or themselves computed; a value written wins.
CREATE TABLE d_expr (ts timestamp NOT NULL, c1 uint32, c2 string DEFAULT '123',
  c3 uint32 DEFAULT c1 + 1, c4 uint32 DEFAULT c3*2 + 1, c5 int DEFAULT -(1 + 1),
  TIMESTAMP KEY(ts));
-- expect affected 0

INSERT INTO d_expr (ts, c1, c4) VALUES (1, 10, 3), (2, 20, NULL), (3, NULL, 7);
-- expect affected 3

SELECT ts, c1, c2, c3, c4, c5 FROM d_expr ORDER BY ts;
-- expect
ts                      | c1   | c2  | c3   | c4   | c5
1970-01-01T00:00:00.001 | 10   | 123 | 11   | 3    | -2
1970-01-01T00:00:00.002 | 20   | 123 | 21   | NULL | -2
1970-01-01T00:00:00.003 | NULL | 123 | NULL | 7    | -2

INSERT INTO d_expr (ts, c1) VALUES (4, 5);
-- expect affected 1

SELECT c3, c4 FROM d_expr WHERE ts = 4;
-- expect
c3 | c4
6  | 13

SHOW CREATE TABLE d_expr;
-- expect
Table  | Create Table
d_expr | CREATE TABLE `d_expr` (`tsid` uint64 NOT NULL, `ts` timestamp NOT NULL, `c1` uint32, `c2` string DEFAULT '123', `c3` uint32 DEFAULT c1 + 1, `c4` uint32 DEFAULT c3 * 2 + 1, `c5` int DEFAULT -(1 + 1), PRIMARY KEY(tsid,ts), TIMESTAMP KEY(ts)) ENGINE=Analytic WITH(compaction_strategy='default', compression='ZSTD', enable_ttl='false', memtable_type='columnar', num_rows_per_row_group='65536', segment_duration='2h', storage_format='AUTO', ttl='7d', update_mode='OVERWRITE', write_buffer_size='33554432')

-- A computed value that does not fit the column is refused, nothing written.
CREATE TABLE d_small (ts timestamp NOT NULL TIMESTAMP KEY, c1 uint8, c2 uint8 DEFAULT c1 * 100);
-- expect affected 0

INSERT INTO d_small (ts, c1) VALUES (1, 3);
-- expect error SchemaMismatch: DEFAULT c1 * 100

-- A default may read only columns declared before it; functions are not taken.
CREATE TABLE d_later (c1 int DEFAULT c2 + 1, c2 int, ts timestamp NOT NULL TIMESTAMP KEY);
-- expect error InvalidArgument: reads 'c2', not a column declared before it

CREATE TABLE d_fn (c1 int DEFAULT abs(1), ts timestamp NOT NULL TIMESTAMP KEY);
-- expect error InvalidArgument: DEFAULT abs(1)

-- ALTER TABLE cannot add one: existing rows would need it computed on read.
ALTER TABLE d_small ADD COLUMN c3 int DEFAULT c1 + 1;
-- expect error InvalidArgument: a DEFAULT computed from other columns

-- PRIMARY KEY(t1, tsid): the implicit key in HoraeDB's other order is the same table.
CREATE TABLE k_order (c1 int, t1 timestamp NOT NULL TIMESTAMP KEY, PRIMARY KEY(t1, tsid));
-- expect affected 0

DESCRIBE k_order;
-- expect
name | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid | uint64    | true       | false       | false  | false
t1   | timestamp | true       | false       | false  | false
c1   | int       | false      | true        | false  | false

-- PRIMARY KEY(tsid, t1, c1): the implicit series id, the timestamp and more columns. Rows
-- of one series and time differing in c1 are rows of their own; the same key is replaced.
CREATE TABLE k3 (c1 int NOT NULL, host string TAG, v double,
  t1 timestamp NOT NULL TIMESTAMP KEY, PRIMARY KEY(tsid, t1, c1));
-- expect affected 0

INSERT INTO k3 (c1, host, v, t1) VALUES (1, 'a', 1.0, 1000), (2, 'a', 2.0, 1000),
  (1, 'b', 4.0, 1000);
-- expect affected 3

-- flush k3

CREATE TABLE k_tags (host string TAG, t1 timestamp NOT NULL TIMESTAMP KEY);
INSERT INTO k_tags (host, t1) VALUES ('a', 0), ('b', 0);

INSERT INTO k3 (c1, host, v, t1) VALUES (1, 'a', 3.0, 1000), (3, 'a', 5.0, 500);
-- expect affected 2

SELECT c1, host, v, t1 FROM k3 ORDER BY host, t1, c1;
-- expect
c1 | host | v   | t1
3  | a    | 5.0 | 1970-01-01T00:00:00.500
1  | a    | 3.0 | 1970-01-01T00:00:01
2  | a    | 2.0 | 1970-01-01T00:00:01
1  | b    | 4.0 | 1970-01-01T00:00:01

-- The series id is the one a table keyed by (tsid, t1) alone gives the same tags.
SELECT count(*) AS same FROM k3 JOIN k_tags ON k3.tsid = k_tags.tsid;
-- expect
same
4

DELETE FROM k3 WHERE host = 'a' AND c1 = 1;
-- expect affected 1

SELECT c1, host, v FROM k3 ORDER BY host, c1;
-- expect
c1 | host | v
2  | a    | 2.0
3  | a    | 5.0
1  | b    | 4.0

DESCRIBE k3;
-- expect
name | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid | uint64    | true       | false       | false  | false
t1   | timestamp | true       | false       | false  | false
c1   | int       | true       | false       | false  | false
host | string    | false      | true        | true   | false
v    | double    | false      | true        | false  | false

-- SHOW CREATE TABLE lists the implicit tsid in the key, and its statement makes the
-- same table again.
SHOW CREATE TABLE k3;
-- expect
Table | Create Table
k3    | CREATE TABLE `k3` (`tsid` uint64 NOT NULL, `t1` timestamp NOT NULL, `c1` int NOT NULL, `host` string TAG, `v` double, PRIMARY KEY(tsid,t1,c1), TIMESTAMP KEY(t1)) ENGINE=Analytic WITH(compaction_strategy='default', compression='ZSTD', enable_ttl='false', memtable_type='columnar', num_rows_per_row_group='65536', segment_duration='2h', storage_format='AUTO', ttl='7d', update_mode='OVERWRITE', write_buffer_size='33554432')

CREATE TABLE `k3_again` (`tsid` uint64 NOT NULL, `t1` timestamp NOT NULL, `c1` int NOT NULL, `host` string TAG, `v` double, PRIMARY KEY(`tsid`, `t1`, `c1`), TIMESTAMP KEY(`t1`)) ENGINE=Analytic;
-- expect affected 0

DESCRIBE k3_again;
-- expect
name | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid | uint64    | true       | false       | false  | false
t1   | timestamp | true       | false       | false  | false
c1   | int       | true       | false       | false  | false
host | string    | false      | true        | true   | false
v    | double    | false      | true        | false  | false

-- In another order the key is the same, the series id first.
CREATE TABLE k4 (c1 int, t1 timestamp NOT NULL TIMESTAMP KEY, PRIMARY KEY(c1, tsid, t1));
-- expect affected 0

DESCRIBE k4;
-- expect
name | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid | uint64    | true       | false       | false  | false
c1   | int       | true       | false       | false  | false
t1   | timestamp | true       | false       | false  | false

CREATE TABLE k5 (c1 int, t1 timestamp NOT NULL TIMESTAMP KEY, PRIMARY KEY(tsid, c1));
-- expect error InvalidArgument: must contain the timestamp key 't1'
