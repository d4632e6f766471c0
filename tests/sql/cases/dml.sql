-- INSERT in its forms, defaults, NULLs, the OVERWRITE / APPEND update modes, and rows that
-- live in the memtable, in SSTs and in both.

CREATE TABLE cpu (host string TAG, region string TAG, usage double, idle double DEFAULT 100.0,
  cores int32 DEFAULT 4, ts timestamp NOT NULL, TIMESTAMP KEY(ts)) WITH (segment_duration='1h');
-- expect affected 0

INSERT INTO cpu (host, region, usage, ts) VALUES ('a', 'eu', 1.5, 1000), ('b', 'us', 2.5, 2000);
-- expect affected 2

-- Without a column list every column but tsid is given, in table order: the key first (the
-- timestamp), then the others as declared.
INSERT INTO cpu VALUES ('1970-01-01 00:00:03', 'c', 'eu', 3.5, 50.0, 8);
-- expect affected 1

-- Omitted columns take their DEFAULT, or NULL.
INSERT INTO cpu (ts, host, region) VALUES (4000, 'd', 'ap');
-- expect affected 1

SELECT host, region, usage, idle, cores, ts FROM cpu ORDER BY ts;
-- expect
host | region | usage | idle  | cores | ts
a    | eu     | 1.5   | 100.0 | 4     | 1970-01-01T00:00:01
b    | us     | 2.5   | 100.0 | 4     | 1970-01-01T00:00:02
c    | eu     | 3.5   | 50.0  | 8     | 1970-01-01T00:00:03
d    | ap     | NULL  | 100.0 | 4     | 1970-01-01T00:00:04

-- An explicit NULL is not replaced by the default.
INSERT INTO cpu (host, region, usage, idle, ts) VALUES ('e', 'eu', NULL, NULL, 5000);
-- expect affected 1

SELECT host, usage, idle, cores FROM cpu WHERE host = 'e';
-- expect
host | usage | idle | cores
e    | NULL  | NULL | 4

-- Timestamps as ISO strings (with milliseconds) and as negative milliseconds.
INSERT INTO cpu (host, region, usage, ts) VALUES ('f', 'eu', 0.25, '1970-01-01T00:00:06.250'),
  ('f', 'eu', -0.5, -1000);
-- expect affected 2

SELECT host, usage, ts FROM cpu WHERE host = 'f' ORDER BY ts;
-- expect
host | usage | ts
f    | -0.5  | 1969-12-31T23:59:59
f    | 0.25  | 1970-01-01T00:00:06.250

-- OVERWRITE: the same series and timestamp again replaces the whole row (in the memtable).
INSERT INTO cpu (host, region, usage, ts) VALUES ('a', 'eu', 9.0, 1000);
-- expect affected 1

SELECT host, usage, idle FROM cpu WHERE host = 'a';
-- expect
host | usage | idle
a    | 9.0   | 100.0

-- Within one INSERT the last row of a key wins.
INSERT INTO cpu (host, region, usage, ts) VALUES ('g', 'eu', 1.0, 7000), ('g', 'eu', 2.0, 7000);
-- expect affected 2

SELECT usage FROM cpu WHERE host = 'g';
-- expect
usage
2.0

-- Same host, other region: another series, so both rows stay.
INSERT INTO cpu (host, region, usage, ts) VALUES ('a', 'us', 7.0, 1000);
-- expect affected 1

SELECT host, region, usage FROM cpu WHERE host = 'a' ORDER BY region;
-- expect
host | region | usage
a    | eu     | 9.0
a    | us     | 7.0

-- flush

-- Overwrite a row that is now in an SST: the memtable version wins over the SST one.
INSERT INTO cpu (host, region, usage, ts) VALUES ('b', 'us', 20.5, 2000);
-- expect affected 1

SELECT host, usage FROM cpu WHERE ts = 2000;
-- expect
host | usage
b    | 20.5

SELECT count(*) AS n, count(usage) AS with_usage FROM cpu;
-- expect
n | with_usage
9 | 7

-- flush

-- Two SSTs now hold (b, us, 2000); reads merge them, newest wins.
SELECT host, region, usage FROM cpu WHERE host = 'b';
-- expect
host | region | usage
b    | us     | 20.5

-- reopen

-- After closing and opening the engine again everything is still there.
SELECT host, region, usage, ts FROM cpu ORDER BY ts, host, region;
-- expect
host | region | usage | ts
f    | eu     | -0.5  | 1969-12-31T23:59:59
a    | eu     | 9.0   | 1970-01-01T00:00:01
a    | us     | 7.0   | 1970-01-01T00:00:01
b    | us     | 20.5  | 1970-01-01T00:00:02
c    | eu     | 3.5   | 1970-01-01T00:00:03
d    | ap     | NULL  | 1970-01-01T00:00:04
e    | eu     | NULL  | 1970-01-01T00:00:05
f    | eu     | 0.25  | 1970-01-01T00:00:06.250
g    | eu     | 2.0   | 1970-01-01T00:00:07

-- Unflushed rows survive a reopen too (replayed from the WAL).
INSERT INTO cpu (host, region, usage, ts) VALUES ('h', 'eu', 11.0, 8000);
-- expect affected 1

-- reopen

SELECT host, usage FROM cpu WHERE ts >= 8000;
-- expect
host | usage
h    | 11.0

-- APPEND keeps every row, duplicates included.
CREATE TABLE events (src string TAG, msg string, ts timestamp NOT NULL, TIMESTAMP KEY(ts))
  WITH (update_mode='APPEND');
-- expect affected 0

INSERT INTO events (src, msg, ts) VALUES ('x', 'one', 1), ('x', 'two', 1), ('y', 'three', 1);
-- expect affected 3

-- flush

INSERT INTO events (src, msg, ts) VALUES ('x', 'one', 1);
-- expect affected 1

SELECT src, msg FROM events ORDER BY src, msg;
-- expect
src | msg
x   | one
x   | one
x   | two
y   | three

-- An explicit PRIMARY KEY (no tsid column): the key is (name, ts).
CREATE TABLE kv (name string NOT NULL, value int64, note string, ts timestamp NOT NULL,
  PRIMARY KEY(name, ts), TIMESTAMP KEY(ts));
-- expect affected 0

INSERT INTO kv (name, value, ts) VALUES ('k1', 1, 10), ('k2', 2, 10), ('k1', 3, 20);
-- expect affected 3

INSERT INTO kv (name, value, note, ts) VALUES ('k1', -4, 'new', 10);
-- expect affected 1

SELECT * FROM kv ORDER BY name, ts;
-- expect
name | ts                      | value | note
k1   | 1970-01-01T00:00:00.010 | -4    | new
k1   | 1970-01-01T00:00:00.020 | 3     | NULL
k2   | 1970-01-01T00:00:00.010 | 2     | NULL

-- Strings with quotes, pipes, blanks and non-ASCII text come back as written.
INSERT INTO kv (name, value, note, ts) VALUES ('k3', 0, 'it''s', 30), ('k4', 0, 'a|b', 30),
  ('k5', 0, '', 30), ('k6', 0, ' pad ', 30), ('k7', 0, 'grüße', 30), ('k8', 0, 'NULL', 30);
-- expect affected 6

SELECT name, note FROM kv WHERE ts = 30 ORDER BY name;
-- expect
name | note
k3   | it's
k4   | 'a|b'
k5   | ''
k6   | ' pad '
k7   | grüße
k8   | 'NULL'

-- Every column type round-trips through INSERT and SELECT.
CREATE TABLE types (k string TAG, b boolean, i8 int8, i16 smallint, i32 int, i64 bigint,
  u8 uint8, u16 uint16, u32 uint32, u64 uint64, f float, d double, s varchar(10), bin varbinary,
  day date, ts timestamp NOT NULL, TIMESTAMP KEY(ts));
-- expect affected 0

INSERT INTO types VALUES (1, 'max', true, 127, 32767, 2147483647, 9223372036854775807, 255,
  65535, 4294967295, 18446744073709551615, 0.5, 1e300, 'text', 'ab', '2024-02-29'),
  (2, 'min', false, -128, -32768, -2147483648, -9223372036854775808, 0, 0, 0, 0, -0.1, -2.5e-300,
  '', '', '1970-01-01');
-- expect affected 2

SELECT k, b, i8, i16, i32, i64, u8, u16, u32, u64, f, d, s, bin, day, ts FROM types ORDER BY k;
-- expect
k   | b     | i8   | i16    | i32         | i64                  | u8  | u16   | u32        | u64                  | f                    | d         | s    | bin    | day        | ts
max | true  | 127  | 32767  | 2147483647  | 9223372036854775807  | 255 | 65535 | 4294967295 | 18446744073709551615 | 0.5                  | 1e+300    | text | 0x6162 | 2024-02-29 | 1970-01-01T00:00:00.001
min | false | -128 | -32768 | -2147483648 | -9223372036854775808 | 0   | 0     | 0          | 0                    | -0.10000000149011612 | -2.5e-300 | ''   | 0x     | 1970-01-01 | 1970-01-01T00:00:00.002

-- The implicit tsid names a series: one id per tag combination, stable across its rows.
SELECT host, region, count(DISTINCT tsid) AS ids, count(*) AS n FROM cpu
  GROUP BY host, region ORDER BY host, region;
-- expect
host | region | ids | n
a    | eu     | 1   | 1
a    | us     | 1   | 1
b    | us     | 1   | 1
c    | eu     | 1   | 1
d    | ap     | 1   | 1
e    | eu     | 1   | 1
f    | eu     | 1   | 2
g    | eu     | 1   | 1
h    | eu     | 1   | 1

SELECT count(DISTINCT tsid) AS series FROM cpu;
-- expect
series
9
