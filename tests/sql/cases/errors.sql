-- Bad statements: each fails with a clear gnomon error (class and message) and changes
-- nothing, which the statements after each one check: the table's rows and columns (and the
-- list of tables after a failed CREATE TABLE) are as before.

CREATE TABLE cpu (host string TAG, usage double, cores int32, small float, up boolean,
  ts timestamp NOT NULL, TIMESTAMP KEY(ts));
INSERT INTO cpu (host, usage, ts) VALUES ('a', 1.5, 1000);
-- flush
INSERT INTO cpu (host, usage, ts) VALUES ('b', 2.5, 2000);

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

-- Malformed SQL: not a statement, bad syntax, bad characters, unterminated text.
SELEC host FROM cpu;
-- expect error InvalidArgument: expected a statement
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

UPDATE cpu SET usage = 0;
-- expect error InvalidArgument: found 'UPDATE'
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

CREATE TABLE x (a int;
-- expect error InvalidArgument: SQL syntax error
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu (host, ts) VALUES ('a', 1;
-- expect error InvalidArgument: SQL syntax error
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SELECT host FROM cpu WHERE;
-- expect error InvalidArgument: Expected: an expression
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SELECT 'abc FROM cpu;
-- expect error InvalidArgument: unterminated ' quote
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SELECT host FROM cpu WHERE host = 'a' \ 1;
-- expect error InvalidArgument: unexpected character
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

DELETE FROM cpu WHERE;
-- expect error InvalidArgument: expected a condition after WHERE
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SELECT 1; SELECT 2;
-- expect error InvalidArgument: only supports a single SQL statement
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

-- Unknown tables.
SELECT * FROM nope;
-- expect error NotFound: table 'nope' does not exist
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO nope (ts) VALUES (1);
-- expect error NotFound: table 'nope' does not exist
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

DELETE FROM nope WHERE ts = 1;
-- expect error NotFound: table 'nope' does not exist
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

DROP TABLE nope;
-- expect error NotFound: table 'nope' does not exist
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

DESCRIBE nope;
-- expect error NotFound: table 'nope' does not exist
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SHOW CREATE TABLE nope;
-- expect error NotFound: table 'nope' does not exist
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

ALTER TABLE nope ADD COLUMN x double;
-- expect error NotFound: table 'nope' does not exist
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SELECT c.host FROM cpu c JOIN nope n ON c.host = n.host;
-- expect error NotFound: 'nope'
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

-- Unknown columns, in queries, INSERT and DELETE.
SELECT nope FROM cpu;
-- expect error InvalidArgument: No field named nope
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SELECT host FROM cpu WHERE nope > 1;
-- expect error InvalidArgument: No field named nope
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SELECT Host FROM cpu ORDER BY "Host";
-- expect error InvalidArgument: No field named "Host"
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu (host, nope, ts) VALUES ('c', 1.0, 3000);
-- expect error InvalidArgument: unknown column 'nope'
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

DELETE FROM cpu WHERE nope = 1;
-- expect error InvalidArgument: No field named nope
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

-- Values of the wrong type in INSERT: nothing of the statement is written, also not its
-- good rows.
INSERT INTO cpu (host, usage, ts) VALUES ('c', 'high', 3000);
-- expect error InvalidArgument: column 'usage' (double): invalid value in INSERT
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu (host, usage, ts) VALUES ('c', 3.0, 3000), ('d', 4.0, 'noon');
-- expect error InvalidArgument: column 'ts' (timestamp): invalid value in INSERT
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu (host, usage, ts) VALUES (42, 3.0, 3000);
-- expect error InvalidArgument: column 'host' (string)
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu (host, cores, ts) VALUES ('c', 2.5, 3000);
-- expect error InvalidArgument: column 'cores' (int32): invalid value in INSERT: 2.5 is not an integer
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu (host, cores, ts) VALUES ('c', 4294967296, 3000);
-- expect error InvalidArgument: column 'cores' (int32)
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu (host, small, ts) VALUES ('c', 1e39, 3000);
-- expect error InvalidArgument: column 'small' (float): invalid value in INSERT: 1e+39 is out of range for float
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu (host, up, ts) VALUES ('c', 1, 3000);
-- expect error InvalidArgument: column 'up' (boolean)
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu (host, usage, ts) VALUES ('c', 1.0, 1.5);
-- expect error InvalidArgument: column 'ts' (timestamp): invalid value in INSERT: 1.5 is not an integer
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu (host, usage, ts) VALUES ('c', 1.0, NULL);
-- expect error InvalidArgument: column 'ts' is NOT NULL
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu (host, usage) VALUES ('c', 1.0);
-- expect error InvalidArgument: missing value for NOT NULL column 'ts'
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu (tsid, host, ts) VALUES (1, 'c', 3000);
-- expect error InvalidArgument: column 'tsid' is computed from the tags
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu (host, host, ts) VALUES ('c', 'd', 3000);
-- expect error InvalidArgument: INSERT column list repeats a column
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

-- The wrong number of values.
INSERT INTO cpu (host, usage, ts) VALUES ('c', 3.0);
-- expect error InvalidArgument: INSERT row 1 has 2 values for 3 columns
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu (host, usage, ts) VALUES ('c', 3.0, 3000), ('d', 4.0, 4000, 5);
-- expect error InvalidArgument: INSERT row 2 has 4 values for 3 columns
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

INSERT INTO cpu VALUES (3000, 'c', 3.0);
-- expect error InvalidArgument: without a column list needs 6 values per row (ts, host, usage, cores, small, up)
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

-- A table that exists already.
CREATE TABLE cpu (x string TAG, ts timestamp NOT NULL, TIMESTAMP KEY(ts));
-- expect error AlreadyExists: table 'cpu' already exists
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

ALTER TABLE cpu ADD COLUMN usage double;
-- expect error InvalidArgument: column 'usage' already exists
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

-- Bad table options and settings.
CREATE TABLE t (ts timestamp NOT NULL, TIMESTAMP KEY(ts)) WITH (bogus='1');
-- expect error InvalidArgument: unknown table option 'bogus'
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

CREATE TABLE t (ts timestamp NOT NULL, TIMESTAMP KEY(ts)) WITH (ttl='soon');
-- expect error InvalidArgument: invalid duration 'soon'
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

CREATE TABLE t (ts timestamp NOT NULL, TIMESTAMP KEY(ts)) WITH (update_mode='SOMETIMES');
-- expect error InvalidArgument: invalid update_mode 'SOMETIMES'
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

CREATE TABLE t (ts timestamp NOT NULL, TIMESTAMP KEY(ts)) WITH (segment_duration='0s');
-- expect error InvalidArgument: segment_duration must be positive
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

CREATE TABLE t (ts timestamp NOT NULL, TIMESTAMP KEY(ts)) ENGINE=Columnar;
-- expect error InvalidArgument: unknown engine 'Columnar'
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

CREATE TABLE t (h string TAG, ts timestamp NOT NULL, TIMESTAMP KEY(ts)) PARTITION BY KEY(h) PARTITIONS 0;
-- expect error InvalidArgument: PARTITIONS must be a positive integer
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

ALTER TABLE cpu MODIFY SETTING nope='1';
-- expect error InvalidArgument: unknown table option 'nope'
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

ALTER TABLE cpu MODIFY SETTING update_mode='APPEND';
-- expect error InvalidArgument: update_mode cannot change
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

-- Bad type names and bad column definitions.
CREATE TABLE t (v blob, ts timestamp NOT NULL, TIMESTAMP KEY(ts));
-- expect error InvalidArgument: unknown column type 'blob'
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

ALTER TABLE cpu ADD COLUMN v decimal(10, 2);
-- expect error InvalidArgument: unknown column type 'decimal'
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

CREATE TABLE t (v double TAG, ts timestamp NOT NULL, TIMESTAMP KEY(ts));
-- expect error InvalidArgument: tag column 'v' cannot be of type double
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

CREATE TABLE t (a string, a string, ts timestamp NOT NULL, TIMESTAMP KEY(ts));
-- expect error InvalidArgument: duplicate column 'a'
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

CREATE TABLE t (a string, ts string, TIMESTAMP KEY(ts));
-- expect error InvalidArgument: timestamp key 'ts' must be of type timestamp
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

CREATE TABLE t (a string, ts timestamp);
-- expect error InvalidArgument: TIMESTAMP KEY(column) is required
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

CREATE TABLE t (a string, ts timestamp, PRIMARY KEY(a), TIMESTAMP KEY(ts));
-- expect error InvalidArgument: must contain the timestamp key 'ts'
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

CREATE TABLE t (tsid string TAG, ts timestamp, TIMESTAMP KEY(ts));
-- expect error InvalidArgument: column name 'tsid' is reserved
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

CREATE TABLE t (n int32 DEFAULT 'x', ts timestamp, TIMESTAMP KEY(ts));
-- expect error InvalidArgument: column 'n' (int32): invalid DEFAULT
SHOW TABLES;
-- expect
Tables
cpu

SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

ALTER TABLE cpu ADD COLUMN n int8 DEFAULT 300;
-- expect error InvalidArgument: column 'n' (int8): invalid DEFAULT
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

ALTER TABLE cpu ADD COLUMN n int32 DEFAULT 1.5;
-- expect error InvalidArgument: 1.5 is not an integer
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

ALTER TABLE cpu ADD COLUMN n double NOT NULL;
-- expect error InvalidArgument: new column 'n' must be nullable or have a default
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

-- Bad time-travel versions (the table has versions 0 and 1).
SELECT * FROM cpu VERSION AS OF 2;
-- expect error NotFound: table 'cpu' has no version 2 (current version: 1)
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SELECT * FROM cpu VERSION AS OF -1;
-- expect error InvalidArgument: VERSION AS OF takes a version number
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SELECT * FROM cpu VERSION AS OF latest;
-- expect error InvalidArgument: VERSION AS OF takes a version number
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SELECT * FROM cpu TIMESTAMP AS OF 'noon';
-- expect error InvalidArgument: TIMESTAMP AS OF takes milliseconds
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SELECT * FROM cpu TIMESTAMP AS OF 0;
-- expect error NotFound: table 'cpu' has no version at timestamp 0
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

-- Errors at execution time: bad casts, bad function arguments.
SELECT host FROM cpu WHERE usage = 'high';
-- expect error InvalidArgument: Cannot cast string 'high'
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SELECT sum(host) FROM cpu;
-- expect error InvalidArgument: sum
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SELECT time_bucket(ts, 'often') FROM cpu;
-- expect error InvalidArgument: invalid time_bucket period 'often'
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

SELECT nosuchfunction(usage) FROM cpu;
-- expect error InvalidArgument: nosuchfunction
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

EXPLAIN DELETE FROM cpu;
-- expect error InvalidArgument: expected a SELECT query to explain
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL

DELETE FROM cpu WHERE usage = 'high';
-- expect error InvalidArgument: Cannot cast string 'high'
SELECT * EXCLUDE (tsid) FROM cpu ORDER BY host;
-- expect
ts                  | host | usage | cores | small | up
1970-01-01T00:00:01 | a    | 1.5   | NULL  | NULL  | NULL
1970-01-01T00:00:02 | b    | 2.5   | NULL  | NULL  | NULL
