-- One column order for a table made by CREATE TABLE: the primary key's columns in key order
-- (the implicit tsid, then the timestamp), then the others as declared, as HoraeDB lists
-- them. SELECT *, DESCRIBE, SHOW CREATE TABLE and INSERT without a column list all use it.

CREATE TABLE col_order (host string TAG, v double, n int32 DEFAULT 7,
  ts timestamp NOT NULL, TIMESTAMP KEY(ts));
-- expect affected 0

-- Without a column list the values come in that order (tsid is computed, never given).
INSERT INTO col_order VALUES (1000, 'a', 1.5, 2), ('1970-01-01 00:00:02', 'b', 2.5, 3);
-- expect affected 2

-- Values in the declared order are refused where they do not fit the column they land in.
INSERT INTO col_order VALUES ('c', 3.5, 4, 3000);
-- expect error InvalidArgument: column 'ts' (timestamp): invalid value in INSERT

INSERT INTO col_order VALUES (3000, 'c', 3.5);
-- expect error InvalidArgument: without a column list needs 4 values per row (ts, host, v, n)

SELECT * FROM col_order ORDER BY ts;
-- expect
tsid                | ts                  | host | v   | n
4854425341896283093 | 1970-01-01T00:00:01 | a    | 1.5 | 2
616991354753833087  | 1970-01-01T00:00:02 | b    | 2.5 | 3

SELECT * EXCLUDE (tsid) FROM col_order ORDER BY ts;
-- expect
ts                  | host | v   | n
1970-01-01T00:00:01 | a    | 1.5 | 2
1970-01-01T00:00:02 | b    | 2.5 | 3

DESCRIBE col_order;
-- expect
name | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid | uint64    | true       | false       | false  | false
ts   | timestamp | true       | false       | false  | false
host | string    | false      | true        | true   | false
v    | double    | false      | true        | false  | false
n    | int       | false      | true        | false  | false

SHOW CREATE TABLE col_order;
-- expect
Table     | Create Table
col_order | CREATE TABLE `col_order` (`tsid` uint64 NOT NULL, `ts` timestamp NOT NULL, `host` string TAG, `v` double, `n` int DEFAULT 7, PRIMARY KEY(tsid,ts), TIMESTAMP KEY(ts)) ENGINE=Analytic WITH(compaction_strategy='default', compression='ZSTD', enable_ttl='false', memtable_type='columnar', num_rows_per_row_group='65536', segment_duration='2h', storage_format='AUTO', ttl='7d', update_mode='OVERWRITE', write_buffer_size='33554432')

-- A column added later comes last, in SELECT * and DESCRIBE alike; rows written before
-- read it as NULL, and the order holds through a flush, a compaction and a restart.
ALTER TABLE col_order ADD COLUMN note string;
-- expect affected 0

-- flush col_order
INSERT INTO col_order VALUES (4000, 'd', 4.5, 5, 'late');
-- expect affected 1
-- flush col_order
-- compact col_order
-- reopen

SELECT * EXCLUDE (tsid) FROM col_order ORDER BY ts;
-- expect
ts                  | host | v   | n | note
1970-01-01T00:00:01 | a    | 1.5 | 2 | NULL
1970-01-01T00:00:02 | b    | 2.5 | 3 | NULL
1970-01-01T00:00:04 | d    | 4.5 | 5 | late

DESCRIBE col_order;
-- expect
name | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid | uint64    | true       | false       | false  | false
ts   | timestamp | true       | false       | false  | false
host | string    | false      | true        | true   | false
v    | double    | false      | true        | false  | false
n    | int       | false      | true        | false  | false
note | string    | false      | true        | false  | false

-- More key columns: the key's order, whatever the order of declaration.
CREATE TABLE col_keys (v double, host string TAG, seq int64 NOT NULL,
  t timestamp NOT NULL TIMESTAMP KEY, PRIMARY KEY(tsid, t, seq));
-- expect affected 0

INSERT INTO col_keys VALUES (1000, 1, 0.5, 'a');
-- expect affected 1

SELECT * EXCLUDE (tsid) FROM col_keys;
-- expect
t                   | seq | v   | host
1970-01-01T00:00:01 | 1   | 0.5 | a

DESCRIBE col_keys;
-- expect
name | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid | uint64    | true       | false       | false  | false
t    | timestamp | true       | false       | false  | false
seq  | bigint    | true       | false       | false  | false
v    | double    | false      | true        | false  | false
host | string    | false      | true        | true   | false

-- An explicit key without tsid: its columns first, in key order.
CREATE TABLE col_plain_key (v double, t timestamp NOT NULL, host string NOT NULL,
  TIMESTAMP KEY(t), PRIMARY KEY(host, t));
-- expect affected 0

INSERT INTO col_plain_key VALUES ('a', 1000, 0.25);
-- expect affected 1

SELECT * FROM col_plain_key;
-- expect
host | t                   | v
a    | 1970-01-01T00:00:01 | 0.25

-- SHOW CREATE TABLE lists the columns in the same order.
SHOW CREATE TABLE col_plain_key;
-- expect
Table         | Create Table
col_plain_key | CREATE TABLE `col_plain_key` (`host` string NOT NULL, `t` timestamp NOT NULL, `v` double, PRIMARY KEY(host,t), TIMESTAMP KEY(t)) ENGINE=Analytic WITH(compaction_strategy='default', compression='ZSTD', enable_ttl='false', memtable_type='columnar', num_rows_per_row_group='65536', segment_duration='2h', storage_format='AUTO', ttl='7d', update_mode='OVERWRITE', write_buffer_size='33554432')

-- A key column comes before the others, so its computed DEFAULT may read only the key
-- columns before it.
CREATE TABLE col_key_default (c0 int, c1 int NOT NULL DEFAULT c0 + 1,
  t timestamp NOT NULL TIMESTAMP KEY, PRIMARY KEY(c1, t));
-- expect error InvalidArgument: key column 'c1': DEFAULT c0 + 1 reads 'c0'; a key column's DEFAULT may read only the key columns before it

CREATE TABLE col_key_default (c1 int NOT NULL DEFAULT c0 * 2, c0 int NOT NULL,
  t timestamp NOT NULL TIMESTAMP KEY, PRIMARY KEY(c0, c1, t));
-- expect affected 0

INSERT INTO col_key_default (t, c0) VALUES (1000, 5);
-- expect affected 1

SELECT * FROM col_key_default;
-- expect
c0 | c1 | t
5  | 10 | 1970-01-01T00:00:01
