-- Time travel: `t VERSION AS OF n` reads the flushed data of manifest version n (every flush
-- or compaction commits the next version; the memtable belongs to none), `t TIMESTAMP AS OF
-- ...` the version current at that time. Background compaction and GC are off while cases
-- run, so the versions below are exactly the flushes (and compactions) of this file.

CREATE TABLE cpu (host string TAG, usage double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))
  WITH (segment_duration='1h');

-- Version 0 is the empty table.
SELECT count(*) AS n FROM cpu VERSION AS OF 0;
-- expect
n
0

INSERT INTO cpu (host, usage, ts) VALUES ('a', 1.0, 1000), ('b', 2.0, 1000);
-- flush
INSERT INTO cpu (host, usage, ts) VALUES ('a', 10.0, 1000), ('c', 3.0, 2000);
-- flush
DELETE FROM cpu WHERE host = 'b';
-- expect affected 1
-- flush
INSERT INTO cpu (host, usage, ts) VALUES ('d', 4.0, 3000);

SELECT host, usage FROM cpu ORDER BY host;
-- expect
host | usage
a    | 10.0
c    | 3.0
d    | 4.0

SELECT host, usage FROM cpu VERSION AS OF 1 ORDER BY host;
-- expect
host | usage
a    | 1.0
b    | 2.0

SELECT host, usage FROM cpu VERSION AS OF 2 ORDER BY host;
-- expect
host | usage
a    | 10.0
b    | 2.0
c    | 3.0

-- The unflushed row of d is in no version.
SELECT host, usage FROM cpu VERSION AS OF 3 ORDER BY host;
-- expect
host | usage
a    | 10.0
c    | 3.0

-- Filters are pushed into the versioned scan as into any other.
SELECT count(*) AS n FROM cpu VERSION AS OF 2 WHERE usage > 2.5;
-- expect
n
2

-- Aliases, with and without AS.
SELECT old.host, old.usage FROM cpu VERSION AS OF 1 AS old WHERE old.host = 'a';
-- expect
host | usage
a    | 1.0

SELECT o.usage FROM cpu VERSION AS OF 1 o WHERE o.host = 'b';
-- expect
usage
2.0

-- Without an alias the table name qualifies columns, whatever clause follows.
SELECT cpu.host FROM cpu VERSION AS OF 1 ORDER BY cpu.host OFFSET 1;
-- expect
host
b

SELECT cpu.host FROM cpu VERSION AS OF 1 OFFSET 5;
-- expect
host

-- Rows alike in versions 1 and 2: only b (a changed).
SELECT cpu.host, n.usage FROM cpu VERSION AS OF 1 NATURAL JOIN cpu VERSION AS OF 2 AS n;
-- expect
host | usage
b    | 2.0

-- Two versions of one table in one query.
SELECT n.host, o.usage AS before, n.usage AS after FROM cpu VERSION AS OF 1 o
  JOIN cpu VERSION AS OF 2 n ON o.host = n.host AND o.ts = n.ts ORDER BY n.host;
-- expect
host | before | after
a    | 1.0    | 10.0
b    | 2.0    | 2.0

SELECT host FROM cpu EXCEPT SELECT host FROM cpu VERSION AS OF 1 ORDER BY host;
-- expect
host
c
d

-- The version current at a time: far in the future that is the latest one (3).
SELECT host FROM cpu TIMESTAMP AS OF '2999-01-01 00:00:00' ORDER BY host;
-- expect
host
a
c

SELECT count(*) AS n FROM cpu TIMESTAMP AS OF 32503680000000;
-- expect
n
2

-- Before the table existed there is no version.
SELECT * FROM cpu TIMESTAMP AS OF 0;
-- expect error NotFound: has no version at timestamp 0

SELECT * FROM cpu VERSION AS OF 4;
-- expect error NotFound: no version 4 (current version: 3)

SELECT * FROM cpu VERSION AS OF -1;
-- expect error InvalidArgument: VERSION AS OF takes a version number

SELECT * FROM cpu VERSION AS OF 1.5;
-- expect error InvalidArgument: VERSION AS OF takes a version number

SELECT * FROM cpu VERSION AS OF 'latest';
-- expect error InvalidArgument: VERSION AS OF takes a version number

SELECT * FROM cpu TIMESTAMP AS OF 'yesterday';
-- expect error InvalidArgument: TIMESTAMP AS OF takes milliseconds or a timestamp string

SELECT * FROM nope VERSION AS OF 1;
-- expect error NotFound: table 'nope' does not exist

-- A column added later reads as its default in old versions too. ALTER freezes the memtable
-- (rows of one schema per memtable) and a background flush picks it up; the flush here waits
-- for it, so version 4 holds d.
ALTER TABLE cpu ADD COLUMN idle double DEFAULT 0.5;
-- expect affected 0
-- flush

SELECT host, usage, idle FROM cpu VERSION AS OF 1 ORDER BY host;
-- expect
host | usage | idle
a    | 1.0   | 0.5
b    | 2.0   | 0.5

SELECT host, usage, idle FROM cpu VERSION AS OF 4 ORDER BY host;
-- expect
host | usage | idle
a    | 10.0  | 0.5
c    | 3.0   | 0.5
d    | 4.0   | 0.5

-- Compaction of the four SSTs commits version 5; the old versions stay readable.
-- compact cpu
SELECT host, usage FROM cpu VERSION AS OF 2 ORDER BY host;
-- expect
host | usage
a    | 10.0
b    | 2.0
c    | 3.0

SELECT host, usage FROM cpu VERSION AS OF 5 ORDER BY host;
-- expect
host | usage
a    | 10.0
c    | 3.0
d    | 4.0

-- Closing flushes the memtable (version 6); versions survive the reopen.
INSERT INTO cpu (host, usage, ts) VALUES ('e', 5.0, 4000);
-- expect affected 1
-- reopen

SELECT host, usage FROM cpu VERSION AS OF 1 ORDER BY host;
-- expect
host | usage
a    | 1.0
b    | 2.0

SELECT host, usage FROM cpu VERSION AS OF 6 ORDER BY host;
-- expect
host | usage
a    | 10.0
c    | 3.0
d    | 4.0
e    | 5.0

SELECT * FROM cpu VERSION AS OF 7;
-- expect error NotFound: no version 7 (current version: 6)
