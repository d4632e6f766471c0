-- HoraeDB's SQL dialect, as far as gnomon takes it (docs/compatibility.md).

-- Table names (and aliases) may start with digits, unquoted, as in HoraeDB (MySQL): a
-- word is a name when a letter or underscore follows its digits; 1e5 and 0x1F stay
-- numbers. Column names may too (below).
CREATE TABLE 03_dml_select (host string TAG, value double, t timestamp NOT NULL,
  TIMESTAMP KEY(t));
-- expect affected 0

INSERT INTO 03_dml_select (host, value, t) VALUES ('a', 1.5, 1000), ('b', 2.5, 2000);
-- expect affected 2

SELECT host, value, t FROM 03_dml_select WHERE value < 1e5 ORDER BY t;
-- expect
host | value | t
a    | 1.5   | 1970-01-01T00:00:01
b    | 2.5   | 1970-01-01T00:00:02

SELECT count(*) AS 1st, 0x1F AS hex FROM 03_DML_SELECT 2x WHERE 2x.host = 'b';
-- expect
1st | hex
1   | 0x1f

DESCRIBE 03_dml_select;
-- expect
name  | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid  | uint64    | true       | false       | false  | false
t     | timestamp | true       | false       | false  | false
host  | string    | false      | true        | true   | false
value | double    | false      | true        | false  | false

SHOW TABLES LIKE '03%';
-- expect
Tables
03_dml_select

-- A name of digits alone is a number, never a table.
CREATE TABLE `0123` (v double, t timestamp NOT NULL, TIMESTAMP KEY(t));
-- expect error InvalidArgument: invalid table name '0123'

DROP TABLE 03_dml_select;
-- expect affected 0

SELECT * FROM 03_dml_select;
-- expect error NotFound: '03_dml_select'

-- Column names starting with num_cols, unquoted or back-quoted, in every statement; after a
-- name and a dot such a word is a qualified column, not the number .3.
CREATE TABLE num_cols (1st_host string TAG, 2nd double, `3rd` int, t timestamp NOT NULL,
  TIMESTAMP KEY(t));
-- expect affected 0

INSERT INTO num_cols (1st_host, 2nd, 3rd, t) VALUES ('a', 1.5, 3, 1000), ('b', 2.5, 4, 2000);
-- expect affected 2

SELECT 1st_host, 2nd, num_cols.3rd, `num_cols`.2nd * .5 AS half, t FROM num_cols
WHERE 2nd > 2 ORDER BY t;
-- expect
1st_host | 2nd | 3rd | half | t
b        | 2.5 | 4   | 1.25 | 1970-01-01T00:00:02

SELECT 1st_host, sum(2nd) AS s FROM num_cols GROUP BY 1st_host ORDER BY 1st_host;
-- expect
1st_host | s
a        | 1.5
b        | 2.5

DELETE FROM num_cols WHERE 1st_host = 'a';
-- expect affected 1

SELECT * FROM num_cols;
-- expect
tsid                 | t                   | 1st_host | 2nd | 3rd
17868363790012946680 | 1970-01-01T00:00:02 | b        | 2.5 | 4

DESCRIBE num_cols;
-- expect
name     | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid     | uint64    | true       | false       | false  | false
t        | timestamp | true       | false       | false  | false
1st_host | string    | false      | true        | true   | false
2nd      | double    | false      | true        | false  | false
3rd      | int       | false      | true        | false  | false

ALTER TABLE num_cols ADD COLUMN 4th string;
-- expect affected 0

SHOW CREATE TABLE num_cols;
-- expect
Table    | Create Table
num_cols | CREATE TABLE `num_cols` (`tsid` uint64 NOT NULL, `t` timestamp NOT NULL, `1st_host` string TAG, `2nd` double, `3rd` int, `4th` string, PRIMARY KEY(tsid,t), TIMESTAMP KEY(t)) ENGINE=Analytic WITH(compaction_strategy='default', compression='ZSTD', enable_ttl='false', memtable_type='columnar', num_rows_per_row_group='65536', segment_duration='2h', storage_format='AUTO', ttl='7d', update_mode='OVERWRITE', write_buffer_size='33554432')

-- A column name of num_cols alone is a number, never a column.
CREATE TABLE d2 (`12` int, t timestamp NOT NULL TIMESTAMP KEY);
-- expect error InvalidArgument: invalid column name '12'

-- Double quotes: a string where a value is expected and the text names nothing the query
-- can mean (HoraeDB's rule for its MySQL-like dialect); a name where it spells a table,
-- a column or an alias, or stands where only a name can. Back-quotes always quote names.
CREATE TABLE dq (name string TAG DEFAULT "none", `Value` double, t timestamp NOT NULL,
  TIMESTAMP KEY(t)) WITH (update_mode="APPEND");
-- expect affected 0

INSERT INTO dq (name, `Value`, t) VALUES ("d1", 1.0, 1000), ("it's", 2.0, 2000),
  ('d2', 3.0, 3000), ("say ""hi""", 4.0, 4000);
-- expect affected 4

INSERT INTO dq (`Value`, t) VALUES (5.0, 5000);
-- expect affected 1

SELECT name, "Value" FROM dq WHERE name = "d1" OR name IN ("it's", "d2") ORDER BY t;
-- expect
name | Value
d1   | 1.0
it's | 2.0
d2   | 3.0

SELECT "That is not good." AS s, concat(name, "!") AS bang FROM "dq" d
WHERE d."name" = "say ""hi""";
-- expect
s                 | bang
That is not good. | say "hi"!

SELECT name "n", count(*) AS "c" FROM dq WHERE "Value" > 2 GROUP BY "n" ORDER BY "c";
-- expect rowsort
n        | c
d2       | 1
none     | 1
say "hi" | 1

-- A double-quoted name stays a name where only a name can stand, or when it spells one
-- in another case (so the mistake is reported, not taken for a constant).
SELECT d."v" FROM dq d;
-- expect error InvalidArgument: No field named d.v

SELECT name FROM dq ORDER BY "NAME";
-- expect error InvalidArgument: No field named "NAME"

-- update_mode="APPEND" took: a row of the same series and time is added, not replaced.
INSERT INTO dq (name, `Value`, t) VALUES ("d1", 9.0, 1000);
-- expect affected 1

SELECT count(*) AS n FROM dq WHERE name = "d1";
-- expect
n
2

DELETE FROM dq WHERE name = "none";
-- expect affected 1

SHOW TABLES LIKE "d%";
-- expect
Tables
dq

-- Queries holding a double-quoted string are analysed afresh each time (their shape is
-- not kept): the second of two shapes alike answers for its own numbers.
SELECT count(*) AS n FROM dq WHERE name = "d1" AND t > 0;
-- expect
n
2

SELECT count(*) AS n FROM dq WHERE name = "d1" AND t > 1500;
-- expect
n
0

-- TIMESTAMP KEY written on its column, as HoraeDB writes it; a table has one.
CREATE TABLE 04_ts_key (host string TAG, t timestamp NOT NULL TIMESTAMP KEY, v int32);
-- expect affected 0

INSERT INTO 04_ts_key (host, t, v) VALUES ("a", 1000, 1);
-- expect affected 1

DESCRIBE 04_ts_key;
-- expect
name | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid | uint64    | true       | false       | false  | false
t    | timestamp | true       | false       | false  | false
host | string    | false      | true        | true   | false
v    | int       | false      | true        | false  | false

SELECT host, t, v FROM 04_ts_key;
-- expect
host | t                   | v
a    | 1970-01-01T00:00:01 | 1

CREATE TABLE two_keys (t1 timestamp NOT NULL TIMESTAMP KEY, t2 timestamp TIMESTAMP KEY);
-- expect error InvalidArgument: two TIMESTAMP KEYs ('t1' and 't2')

CREATE TABLE two_keys (t1 timestamp NOT NULL TIMESTAMP KEY, t2 timestamp, TIMESTAMP KEY(t2));
-- expect error InvalidArgument: two TIMESTAMP KEYs ('t1' and 't2')

CREATE TABLE two_keys (t1 timestamp NOT NULL, TIMESTAMP KEY(t1), TIMESTAMP KEY(t1));
-- expect error InvalidArgument: two TIMESTAMP KEYs ('t1' and 't1')

ALTER TABLE 04_ts_key ADD COLUMN t3 timestamp TIMESTAMP KEY;
-- expect error InvalidArgument: ALTER TABLE cannot add a TIMESTAMP KEY

SHOW TABLES LIKE 'two%';
-- expect
Tables

-- INSERT INTO TABLE t, and binary literals x'..' (in INSERT and in queries).
CREATE TABLE binary_demo (name string TAG, value varbinary, t timestamp NOT NULL TIMESTAMP KEY);
-- expect affected 0

INSERT INTO TABLE binary_demo (t, name, value) VALUES (1000, 'a', x'11'), (2000, 'b', X'0aFF');
-- expect affected 2

INSERT INTO TABLE binary_demo VALUES (3000, 'c', x'');
-- expect affected 1

SELECT name, value FROM binary_demo WHERE value = x'11' OR value = X'0AFF' ORDER BY t;
-- expect
name | value
a    | 0x11
b    | 0x0aff

SELECT name, value FROM binary_demo WHERE t = 3000;
-- expect
name | value
c    | 0x

INSERT INTO binary_demo (t, name, value) VALUES (4000, 'd', x'1');
-- expect error InvalidArgument: invalid binary literal x'1'

-- A table named "table" is still written to by INSERT INTO table.
CREATE TABLE `table` (v int32, t timestamp NOT NULL TIMESTAMP KEY);
-- expect affected 0

INSERT INTO table VALUES (1000, 1);
-- expect affected 1

INSERT INTO TABLE table (v, t) VALUES (2, 2000);
-- expect affected 1

SELECT count(*) AS n FROM `table`;
-- expect
n
2

-- WITH (storage_format=...): HoraeDB's three formats are taken (gnomon stores every table
-- alike), any other value is refused.
CREATE TABLE 05_columnar (c1 int, t1 timestamp NOT NULL TIMESTAMP KEY) ENGINE = Analytic
  WITH (storage_format= 'columnar');
-- expect affected 0

CREATE TABLE 05_hybrid (c1 int, t1 timestamp NOT NULL TIMESTAMP KEY)
  WITH (storage_format='HYBRID', enable_ttl='false');
-- expect affected 0

CREATE TABLE 05_auto (c1 int, t1 timestamp NOT NULL TIMESTAMP KEY) WITH (storage_format="auto");
-- expect affected 0

CREATE TABLE 05_unknown (c1 int, t1 timestamp NOT NULL TIMESTAMP KEY)
  WITH (storage_format='unknown');
-- expect error InvalidArgument: unknown storage_format 'unknown'

SHOW TABLES LIKE '05_%';
-- expect
Tables
05_auto
05_columnar
05_hybrid

-- PRIMARY KEY(tsid, t) names the implicit series id: the table is the same as without it.
CREATE TABLE 05_tsid_key (c1 int, t1 timestamp NOT NULL TIMESTAMP KEY, PRIMARY KEY(tsid, t1));
-- expect affected 0

DESCRIBE 05_tsid_key;
-- expect
name | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid | uint64    | true       | false       | false  | false
t1   | timestamp | true       | false       | false  | false
c1   | int       | false      | true        | false  | false

INSERT INTO 05_tsid_key (c1, t1) VALUES (1, 1000), (2, 1000);
-- expect affected 2

SELECT c1 FROM 05_tsid_key;
-- expect
c1
2

-- With more columns too (horaedb_defaults_keys.sql has the rest).
CREATE TABLE 05_tsid_more (c1 int NOT NULL, t1 timestamp NOT NULL TIMESTAMP KEY,
  PRIMARY KEY(tsid, t1, c1));
-- expect affected 0

INSERT INTO 05_tsid_more (c1, t1) VALUES (1, 1000), (2, 1000);
-- expect affected 2

SELECT c1 FROM 05_tsid_more ORDER BY c1;
-- expect
c1
1
2

-- Names keep their case, as in HoraeDB: another case finds nothing, back-quoted or not.
CREATE TABLE case_T (ts timestamp NOT NULL, VALUE1 double, timestamp KEY (ts))
  WITH (enable_ttl='false');
-- expect affected 0

INSERT INTO case_T (ts, VALUE1) VALUES (1, 10), (2, 20);
-- expect affected 2

SELECT ts, VALUE1 FROM case_T WHERE VALUE1 > 15;
-- expect
ts                      | VALUE1
1970-01-01T00:00:00.002 | 20.0

SELECT * FROM `case_T` ORDER BY ts;
-- expect
tsid                 | ts                      | VALUE1
0                    | 1970-01-01T00:00:00.001 | 10.0
0                    | 1970-01-01T00:00:00.002 | 20.0

SELECT * FROM CASE_T;
-- expect error NotFound: 'case_t'

SELECT * FROM `CASE_T`;
-- expect error NotFound: 'CASE_T'

SELECT value1 FROM case_T;
-- expect error InvalidArgument: value1

DESCRIBE `case_T`;
-- expect
name   | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid   | uint64    | true       | false       | false  | false
ts     | timestamp | true       | false       | false  | false
VALUE1 | double    | false      | true        | false  | false

DESC CASE_T;
-- expect error NotFound: 'CASE_T'

-- A table whose name was folded to lower case (as gnomon did before names kept their
-- case) is found by an unquoted name in any case.
CREATE TABLE `folded` (host string TAG, v double, t timestamp NOT NULL, TIMESTAMP KEY(t));
-- expect affected 0

INSERT INTO FOLDED (Host, V, T) VALUES ('a', 1.0, 1000);
-- expect affected 1

SELECT Host, V FROM Folded;
-- expect
host | v
a    | 1.0

-- time_bucket: calendar months and years (P1M, P1Y), and HoraeDB's optional arguments
-- (input format, time zone, output format); buckets are in UTC unless a zone is given.
CREATE TABLE tb (v double, t timestamp NOT NULL, TIMESTAMP KEY(t));
-- expect affected 0

INSERT INTO tb (v, t) VALUES (1, '2022-07-02 17:20:00'), (2, '2022-08-04 01:57:03');
-- expect affected 2

SELECT time_bucket(t, 'P1M') AS m, time_bucket(t, 'P1Y') AS y FROM tb ORDER BY t;
-- expect
m                   | y
2022-07-01T00:00:00 | 2022-01-01T00:00:00
2022-08-01T00:00:00 | 2022-01-01T00:00:00

SELECT time_bucket(t, 'P1D', 'yyyy-MM-dd HH:mm:ss', '+0800') AS d,
  time_bucket(t, 'PT1H', 'yyyy-MM-dd HH:mm:ss', '+0800', 'yyyy-MM-dd HH') AS h,
  time_bucket(t, 'P1M', 'yyyy-MM-dd') AS m FROM tb ORDER BY t;
-- expect
d                   | h                   | m
2022-07-02T16:00:00 | 2022-07-02T17:00:00 | 2022-07-01T00:00:00
2022-08-03T16:00:00 | 2022-08-04T01:00:00 | 2022-08-01T00:00:00

SELECT time_bucket(t, 'P1M1D') FROM tb;
-- expect error InvalidArgument: months or years cannot mix with other units

SELECT time_bucket(t, 'PT1H', '', 'Mars/Base') FROM tb;
-- expect error InvalidArgument: invalid time zone 'Mars/Base'

-- thetasketch_distinct: HoraeDB's distinct count of numbers (its sketch is exact up to
-- 4096 values; gnomon's count is exact at any size), as an unsigned integer.
SELECT thetasketch_distinct(v) AS n, thetasketch_distinct(v * 0) AS zero FROM tb;
-- expect
n | zero
2 | 1

-- "" is HoraeDB's empty string where a value stands; never an empty name.
INSERT INTO dq (name, `Value`, t) VALUES ("", 7.0, 7000);
-- expect affected 1

SELECT name = "" AS empty FROM dq WHERE t = 7000;
-- expect
empty
true

CREATE TABLE "" (t timestamp NOT NULL, TIMESTAMP KEY(t));
-- expect error InvalidArgument: empty quoted identifier at position 13

-- DESCRIBE and SHOW CREATE TABLE in HoraeDB's shape: the key columns first (the implicit
-- tsid, then the timestamp key), HoraeDB's type names, is_dictionary from DICTIONARY.
CREATE TABLE shape (c1 int, d string DICTIONARY, n bigint NOT NULL, s smallint, h string TAG,
  t1 timestamp NOT NULL TIMESTAMP KEY);
-- expect affected 0

DESCRIBE shape;
-- expect
name | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid | uint64    | true       | false       | false  | false
t1   | timestamp | true       | false       | false  | false
c1   | int       | false      | true        | false  | false
d    | string    | false      | true        | false  | true
n    | bigint    | false      | false       | false  | false
s    | smallint  | false      | true        | false  | false
h    | string    | false      | true        | true   | false

SHOW CREATE TABLE shape;
-- expect
Table | Create Table
shape | CREATE TABLE `shape` (`tsid` uint64 NOT NULL, `t1` timestamp NOT NULL, `c1` int, `d` string DICTIONARY, `n` bigint NOT NULL, `s` smallint, `h` string TAG, PRIMARY KEY(tsid,t1), TIMESTAMP KEY(t1)) ENGINE=Analytic WITH(compaction_strategy='default', compression='ZSTD', enable_ttl='false', memtable_type='columnar', num_rows_per_row_group='65536', segment_duration='2h', storage_format='AUTO', ttl='7d', update_mode='OVERWRITE', write_buffer_size='33554432')

-- Only a string column can be DICTIONARY.
CREATE TABLE shape2 (d double DICTIONARY, t timestamp NOT NULL TIMESTAMP KEY);
-- expect error InvalidArgument: only a string column can be DICTIONARY

-- SHOW CREATE TABLE's output (with the implicit tsid written out) makes the same table.
DROP TABLE shape;
-- expect affected 0

CREATE TABLE `shape` (`tsid` uint64 NOT NULL, `t1` timestamp NOT NULL, `c1` int, `d` string DICTIONARY, `n` bigint NOT NULL, `s` smallint, `h` string TAG, PRIMARY KEY(`tsid`, `t1`), TIMESTAMP KEY(`t1`)) ENGINE=Analytic;
-- expect affected 0

DESCRIBE shape;
-- expect
name | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid | uint64    | true       | false       | false  | false
t1   | timestamp | true       | false       | false  | false
c1   | int       | false      | true        | false  | false
d    | string    | false      | true        | false  | true
n    | bigint    | false      | false       | false  | false
s    | smallint  | false      | true        | false  | false
h    | string    | false      | true        | true   | false

INSERT INTO shape (t1, c1, d, n, h) VALUES (1, 1, 'x', 2, 'a');
-- expect affected 1

SELECT t1, c1, d, n, h FROM shape;
-- expect
t1                      | c1 | d | n | h
1970-01-01T00:00:00.001 | 1  | x | 2 | a

-- system.public.tables: one row per table, in HoraeDB's columns; a table of the user's
-- named `tables` is another table.
CREATE TABLE `01_system_table1` (`timestamp` timestamp NOT NULL, `arch` string TAG,
  `value` double, timestamp KEY (timestamp)) ENGINE=Analytic;
-- expect affected 0

CREATE TABLE tables (name string TAG, t timestamp NOT NULL TIMESTAMP KEY);
INSERT INTO tables (name, t) VALUES ('mine', 0);

SELECT `timestamp`, `catalog`, `schema`, `table_name`, `engine` FROM system.public.tables
WHERE table_name = '01_system_table1';
-- expect
timestamp           | catalog | schema | table_name       | engine
1970-01-01T00:00:00 | horaedb | public | 01_system_table1 | Analytic

SELECT st.table_name, tables.name FROM SYSTEM.PUBLIC.TABLES st JOIN tables
  ON st.table_name = 'tables';
-- expect
table_name | name
tables     | mine

SELECT count(*) AS n, min(table_id) > 0 AS ids FROM system.public.tables
WHERE table_name IN ('tables', '01_system_table1', 'case_T');
-- expect
n | ids
3 | true

DROP TABLE `01_system_table1`;
-- expect affected 0

SELECT table_name FROM system.public.tables WHERE table_name LIKE '01%';
-- expect
table_name

-- A row without any tag value has tsid 0, as in HoraeDB (tables made before keep the hash of
-- no tags they stored such rows under). A tag added later leaves those rows' series alone.
CREATE TABLE untagged (v double, t timestamp NOT NULL, TIMESTAMP KEY(t));
-- expect affected 0

INSERT INTO untagged (t, v) VALUES (1, 1.5), (2, 2.5);
-- expect affected 2

ALTER TABLE untagged ADD COLUMN host string TAG;
-- expect affected 0

INSERT INTO untagged (t, v, host) VALUES (3, 3.5, NULL), (3, 4.5, 'a');
-- expect affected 2

SELECT t, host, v, tsid = 0 AS zero FROM untagged ORDER BY t, v;
-- expect
t                       | host | v   | zero
1970-01-01T00:00:00.001 | NULL | 1.5 | true
1970-01-01T00:00:00.002 | NULL | 2.5 | true
1970-01-01T00:00:00.003 | NULL | 3.5 | true
1970-01-01T00:00:00.003 | a    | 4.5 | false

DELETE FROM untagged WHERE t = 2 AND host IS NULL;
-- expect affected 1

SELECT count(*) AS n, count(DISTINCT tsid) AS series FROM untagged;
-- expect
n | series
3 | 2
