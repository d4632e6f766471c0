-- Partition tables on a standalone server: PARTITION BY KEY(tag) PARTITIONS n makes n
-- sub-tables, every one local; SHOW TABLES lists the table, not its sub-tables; INSERT
-- splits rows by the key's hash; queries read the sub-tables the key's = / IN leave, split
-- over them (partial aggregates, top-k) or scanned; DROP removes every sub-table.

CREATE TABLE cpu (host string TAG, region string TAG, usage double, ts timestamp NOT NULL,
  TIMESTAMP KEY(ts)) PARTITION BY KEY(host) PARTITIONS 3;
-- expect affected 0

SHOW TABLES;
-- expect
Tables
cpu

INSERT INTO cpu (host, region, usage, ts) VALUES ('a', 'eu', 1.5, 1000), ('b', 'eu', 2.5, 2000),
  ('c', 'us', 3.5, 3000), ('d', 'us', NULL, 4000), ('a', 'eu', 5.5, 61000);
-- expect affected 5

-- flush
INSERT INTO cpu (host, region, usage, ts) VALUES ('e', 'ap', 7.0, 62000);
-- expect affected 1

SELECT host, usage FROM cpu WHERE host IN ('a', 'e') ORDER BY ts DESC;
-- expect
host | usage
e    | 7.0
a    | 5.5
a    | 1.5

SELECT region, count(*) AS n, count(usage) AS m, avg(usage) AS a, max(ts) AS last FROM cpu
  GROUP BY region ORDER BY n DESC, region;
-- expect
region | n | m | a   | last
eu     | 3 | 3 | 3.1666666666666665 | 1970-01-01T00:01:01
us     | 2 | 1 | 3.5 | 1970-01-01T00:00:04
ap     | 1 | 1 | 7.0 | 1970-01-01T00:01:02

SELECT date_bin(INTERVAL '1 minute', ts) AS b, sum(usage) FROM cpu GROUP BY b ORDER BY b;
-- expect
b                   | sum(cpu.usage)
1970-01-01T00:00:00 | 7.5
1970-01-01T00:01:00 | 12.5

SELECT host FROM cpu ORDER BY usage DESC NULLS FIRST LIMIT 2;
-- expect
host
d
e

SELECT DISTINCT region FROM cpu WHERE host <> 'b' ORDER BY region;
-- expect
region
ap
eu
us

ALTER TABLE cpu ADD COLUMN cores int32;
-- expect error InvalidArgument: table 'cpu' is a partition table: ALTER TABLE is not supported for partition tables yet

DELETE FROM cpu WHERE host = 'a';
-- expect error InvalidArgument: table 'cpu' is a partition table: DELETE is not supported on partition tables yet

CREATE TABLE bad (host string TAG, usage double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))
  PARTITION BY KEY(usage) PARTITIONS 2;
-- expect error InvalidArgument: table 'bad': partition key column 'usage' must be a string TAG column (it is a field of type double)

DROP TABLE cpu;
-- expect affected 0

SHOW TABLES;
-- expect
Tables
