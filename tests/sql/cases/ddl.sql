-- CREATE / ALTER / DROP TABLE, SHOW TABLES and DESCRIBE.

SHOW TABLES;
-- expect
Tables

CREATE TABLE cpu (host string TAG, region string TAG, usage double, ts timestamp NOT NULL,
  TIMESTAMP KEY(ts)) ENGINE=Analytic;
-- expect affected 0

DESCRIBE cpu;
-- expect
name   | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid   | uint64    | true       | false       | false  | false
ts     | timestamp | true       | false       | false  | false
host   | string    | false      | true        | true   | false
region | string    | false      | true        | true   | false
usage  | double    | false      | true        | false  | false

-- IF NOT EXISTS on an existing table changes nothing, even with another schema.
CREATE TABLE IF NOT EXISTS cpu (x string TAG, ts timestamp NOT NULL, TIMESTAMP KEY(ts));
-- expect affected 0

DESC TABLE cpu;
-- expect
name   | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid   | uint64    | true       | false       | false  | false
ts     | timestamp | true       | false       | false  | false
host   | string    | false      | true        | true   | false
region | string    | false      | true        | true   | false
usage  | double    | false      | true        | false  | false

-- Type aliases map to the engine's types; keywords are case-insensitive; the partition
-- clause and the dictionary hint are accepted.
create table aliases (a bigint, b int, c integer, d smallint, e tinyint, f real, g bool,
  h text TAG DICTIONARY, i varchar(255), j bytes, k binary, t TIMESTAMP not null,
  timestamp key(t)) partition by key(h) partitions 4 engine = analytic;
-- expect affected 0

DESCRIBE aliases;
-- expect
name | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid | uint64    | true       | false       | false  | false
t    | timestamp | true       | false       | false  | false
a    | bigint    | false      | true        | false  | false
b    | int       | false      | true        | false  | false
c    | int       | false      | true        | false  | false
d    | smallint  | false      | true        | false  | false
e    | tinyint   | false      | true        | false  | false
f    | float     | false      | true        | false  | false
g    | boolean   | false      | true        | false  | false
h    | string    | false      | true        | true   | true
i    | string    | false      | true        | false  | false
j    | varbinary | false      | true        | false  | false
k    | varbinary | false      | true        | false  | false

-- Names keep their case, quoted or not; another case finds nothing.
CREATE TABLE `CamelCase` (`Host` string TAG, "Zone" string TAG, `order` int32,
  ts timestamp NOT NULL, TIMESTAMP KEY(ts));
-- expect affected 0

SHOW TABLES;
-- expect
Tables
CamelCase
aliases
cpu

INSERT INTO `CamelCase` (`Host`, "Zone", `order`, ts) VALUES ('h', 'z', 7, 1);
-- expect affected 1

SELECT "Host", "Zone", "order" FROM "CamelCase";
-- expect
Host | Zone | order
h    | z    | 7

SELECT count(*) AS n FROM camelcase;
-- expect error NotFound: 'camelcase'

SHOW TABLES LIKE 'c%';
-- expect
Tables
cpu

SHOW TABLES LIKE '_amel%';
-- expect
Tables
CamelCase

SHOW TABLES LIKE 'nothing%';
-- expect
Tables

-- ALTER TABLE: new columns (one or several), then settings.
INSERT INTO cpu (host, region, usage, ts) VALUES ('a', 'eu', 1.0, 1000);
ALTER TABLE cpu ADD COLUMN idle double DEFAULT 9.5;
-- expect affected 0

ALTER TABLE cpu ADD COLUMN note string, ADD COLUMN level int8 NOT NULL DEFAULT 3;
-- expect affected 0

ALTER TABLE cpu ADD (dc string TAG);
-- expect affected 0

INSERT INTO cpu (host, region, usage, note, dc, ts) VALUES ('a', 'eu', 2.0, 'new', 'x', 2000);
-- expect affected 1

SELECT host, dc, usage, idle, note, level FROM cpu ORDER BY ts;
-- expect
host | dc   | usage | idle | note | level
a    | NULL | 1.0   | 9.5  | NULL | 3
a    | x    | 2.0   | 9.5  | new  | 3

DESCRIBE cpu;
-- expect
name   | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid   | uint64    | true       | false       | false  | false
ts     | timestamp | true       | false       | false  | false
host   | string    | false      | true        | true   | false
region | string    | false      | true        | true   | false
usage  | double    | false      | true        | false  | false
idle   | double    | false      | true        | false  | false
note   | string    | false      | true        | false  | false
level  | tinyint   | false      | false       | false  | false
dc     | string    | false      | true        | true   | false

ALTER TABLE cpu MODIFY SETTING write_buffer_size='1048576', compaction_min_threshold='2';
-- expect affected 0

-- DROP removes the table and its data; a new table of the same name starts empty.
DROP TABLE aliases;
-- expect affected 0

DROP TABLE IF EXISTS aliases;
-- expect affected 0

-- flush
DROP TABLE cpu;
-- expect affected 0

CREATE TABLE cpu (host string TAG, v int64, ts timestamp NOT NULL, TIMESTAMP KEY(ts));
-- expect affected 0

SELECT count(*) AS n FROM cpu;
-- expect
n
0

SHOW TABLES;
-- expect
Tables
CamelCase
cpu

-- reopen

SHOW TABLES;
-- expect
Tables
CamelCase
cpu

DESCRIBE cpu;
-- expect
name | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid | uint64    | true       | false       | false  | false
ts   | timestamp | true       | false       | false  | false
host | string    | false      | true        | true   | false
v    | bigint    | false      | true        | false  | false
