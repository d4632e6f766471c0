-- SHOW CREATE TABLE prints DDL that creates the same table again: each table below is shown,
-- dropped, created from exactly the text shown, and shown again (the same text).

CREATE TABLE `Metrics` (
  `Host` string TAG COMMENT 'machine name',
  region varchar(32) TAG NOT NULL DEFAULT 'eu',
  usage double NOT NULL DEFAULT 0.5 COMMENT 'it''s a share',
  cores int32 DEFAULT 4,
  ok bool DEFAULT true,
  note text,
  ts timestamp NOT NULL,
  TIMESTAMP KEY(ts)
) ENGINE=Analytic WITH (segment_duration='30m', ttl='3d', enable_ttl='true',
  num_rows_per_row_group='1024', compression='snappy', write_buffer_size='1048576');
-- expect affected 0

SHOW CREATE TABLE `Metrics`;
-- expect
Table   | Create Table
Metrics | CREATE TABLE `Metrics` (`tsid` uint64 NOT NULL, `ts` timestamp NOT NULL, `Host` string TAG COMMENT 'machine name', `region` string TAG NOT NULL DEFAULT 'eu', `usage` double NOT NULL DEFAULT 0.5 COMMENT 'it''s a share', `cores` int DEFAULT 4, `ok` boolean DEFAULT true, `note` string, PRIMARY KEY(tsid,ts), TIMESTAMP KEY(ts)) ENGINE=Analytic WITH(compaction_strategy='default', compression='SNAPPY', enable_ttl='true', memtable_type='columnar', num_rows_per_row_group='1024', segment_duration='30m', storage_format='AUTO', ttl='3d', update_mode='OVERWRITE', write_buffer_size='1048576')

DESCRIBE `Metrics`;
-- expect
name   | type      | is_primary | is_nullable | is_tag | is_dictionary
tsid   | uint64    | true       | false       | false  | false
ts     | timestamp | true       | false       | false  | false
Host   | string    | false      | true        | true   | false
region | string    | false      | false       | true   | false
usage  | double    | false      | false       | false  | false
cores  | int       | false      | true        | false  | false
ok     | boolean   | false      | true        | false  | false
note   | string    | false      | true        | false  | false

DROP TABLE `Metrics`;
-- expect affected 0

SHOW TABLES;
-- expect
Tables

CREATE TABLE `Metrics` (`Host` string TAG NULL COMMENT 'machine name', `region` string TAG NOT NULL DEFAULT 'eu', `usage` double NOT NULL DEFAULT 0.5 COMMENT 'it''s a share', `cores` int32 NULL DEFAULT 4, `ok` boolean NULL DEFAULT true, `note` string NULL, `ts` timestamp NOT NULL, TIMESTAMP KEY(`ts`)) ENGINE=Analytic WITH (segment_duration='30m', update_mode='OVERWRITE', write_buffer_size='1048576', ttl='3d', enable_ttl='true', num_rows_per_row_group='1024', compression='snappy', enable_compaction='true', compaction_min_threshold='4', compaction_max_threshold='16', compaction_target_size='268435456', compaction_full_after='off', compaction_mode='auto', time_travel='1h', max_versions='100');
-- expect affected 0

SHOW CREATE TABLE `Metrics`;
-- expect
Table   | Create Table
Metrics | CREATE TABLE `Metrics` (`tsid` uint64 NOT NULL, `ts` timestamp NOT NULL, `Host` string TAG COMMENT 'machine name', `region` string TAG NOT NULL DEFAULT 'eu', `usage` double NOT NULL DEFAULT 0.5 COMMENT 'it''s a share', `cores` int DEFAULT 4, `ok` boolean DEFAULT true, `note` string, PRIMARY KEY(tsid,ts), TIMESTAMP KEY(ts)) ENGINE=Analytic WITH(compaction_strategy='default', compression='SNAPPY', enable_ttl='true', memtable_type='columnar', num_rows_per_row_group='1024', segment_duration='30m', storage_format='AUTO', ttl='3d', update_mode='OVERWRITE', write_buffer_size='1048576')

-- The recreated table works as the original did, defaults and TTL included: a row from 1970
-- is long past the 3 day TTL and not visible, a row from 2200 is.
INSERT INTO `Metrics` (`Host`, ts) VALUES ('h1', 1000), ('h2', '2200-01-01 00:00:00');
-- expect affected 2

SELECT "Host", region, usage, cores, ok, note, ts FROM "Metrics";
-- expect
Host | region | usage | cores | ok   | note | ts
h2   | eu     | 0.5   | 4     | true | NULL | 2200-01-01T00:00:00

-- An explicit primary key, APPEND mode and no tags.
CREATE TABLE log (app string NOT NULL, seq uint64 NOT NULL, line string, at timestamp NOT NULL,
  PRIMARY KEY(app, seq, at), TIMESTAMP KEY(at)) WITH (update_mode='APPEND',
  enable_compaction='false', compaction_min_threshold='2', compaction_max_threshold='8',
  time_travel='2h', max_versions='10');
-- expect affected 0

SHOW CREATE TABLE log;
-- expect
Table | Create Table
log   | CREATE TABLE `log` (`app` string NOT NULL, `seq` uint64 NOT NULL, `at` timestamp NOT NULL, `line` string, PRIMARY KEY(app,seq,at), TIMESTAMP KEY(at)) ENGINE=Analytic WITH(compaction_max_threshold='8', compaction_min_threshold='2', compaction_strategy='default', compression='ZSTD', enable_compaction='false', enable_ttl='false', max_versions='10', memtable_type='columnar', num_rows_per_row_group='65536', segment_duration='2h', storage_format='AUTO', time_travel='2h', ttl='7d', update_mode='APPEND', write_buffer_size='33554432')

DROP TABLE log;
-- expect affected 0

CREATE TABLE `log` (`app` string NOT NULL, `seq` uint64 NOT NULL, `line` string NULL, `at` timestamp NOT NULL, PRIMARY KEY(`app`, `seq`, `at`), TIMESTAMP KEY(`at`)) ENGINE=Analytic WITH (segment_duration='2h', update_mode='APPEND', write_buffer_size='33554432', ttl='1w', enable_ttl='false', num_rows_per_row_group='65536', compression='zstd', enable_compaction='false', compaction_min_threshold='2', compaction_max_threshold='8', compaction_target_size='268435456', compaction_full_after='off', compaction_mode='auto', time_travel='2h', max_versions='10');
-- expect affected 0

SHOW CREATE TABLE log;
-- expect
Table | Create Table
log   | CREATE TABLE `log` (`app` string NOT NULL, `seq` uint64 NOT NULL, `at` timestamp NOT NULL, `line` string, PRIMARY KEY(app,seq,at), TIMESTAMP KEY(at)) ENGINE=Analytic WITH(compaction_max_threshold='8', compaction_min_threshold='2', compaction_strategy='default', compression='ZSTD', enable_compaction='false', enable_ttl='false', max_versions='10', memtable_type='columnar', num_rows_per_row_group='65536', segment_duration='2h', storage_format='AUTO', time_travel='2h', ttl='7d', update_mode='APPEND', write_buffer_size='33554432')

DESCRIBE log;
-- expect
name | type      | is_primary | is_nullable | is_tag | is_dictionary
app  | string    | true       | false       | false  | false
seq  | uint64    | true       | false       | false  | false
at   | timestamp | true       | false       | false  | false
line | string    | false      | true        | false  | false

-- Columns added later and changed settings are part of the DDL.
CREATE TABLE cpu (host string TAG, ts timestamp NOT NULL, TIMESTAMP KEY(ts));
ALTER TABLE cpu ADD COLUMN idle double DEFAULT 5.5, ADD COLUMN note string COMMENT 'free text';
-- expect affected 0

ALTER TABLE cpu ADD COLUMN (zone string TAG, level int8 DEFAULT -1);
-- expect affected 0

ALTER TABLE cpu MODIFY SETTING ttl='30d', enable_ttl='true', segment_duration='1d';
-- expect affected 0

SHOW CREATE TABLE cpu;
-- expect
Table | Create Table
cpu   | CREATE TABLE `cpu` (`tsid` uint64 NOT NULL, `ts` timestamp NOT NULL, `host` string TAG, `idle` double DEFAULT 5.5, `note` string COMMENT 'free text', `zone` string TAG, `level` tinyint DEFAULT -1, PRIMARY KEY(tsid,ts), TIMESTAMP KEY(ts)) ENGINE=Analytic WITH(compaction_strategy='default', compression='ZSTD', enable_ttl='true', memtable_type='columnar', num_rows_per_row_group='65536', segment_duration='1d', storage_format='AUTO', ttl='30d', update_mode='OVERWRITE', write_buffer_size='33554432')

DROP TABLE cpu;
CREATE TABLE `cpu` (`host` string TAG NULL, `ts` timestamp NOT NULL, `idle` double NULL DEFAULT 5.5, `note` string NULL COMMENT 'free text', `zone` string TAG NULL, `level` int8 NULL DEFAULT -1, TIMESTAMP KEY(`ts`)) ENGINE=Analytic WITH (segment_duration='1d', update_mode='OVERWRITE', write_buffer_size='33554432', ttl='30d', enable_ttl='true', num_rows_per_row_group='65536', compression='zstd', enable_compaction='true', compaction_min_threshold='4', compaction_max_threshold='16', compaction_target_size='268435456', compaction_full_after='off', compaction_mode='auto', time_travel='1h', max_versions='100');
-- expect affected 0

SHOW CREATE TABLE cpu;
-- expect
Table | Create Table
cpu   | CREATE TABLE `cpu` (`tsid` uint64 NOT NULL, `ts` timestamp NOT NULL, `host` string TAG, `idle` double DEFAULT 5.5, `note` string COMMENT 'free text', `zone` string TAG, `level` tinyint DEFAULT -1, PRIMARY KEY(tsid,ts), TIMESTAMP KEY(ts)) ENGINE=Analytic WITH(compaction_strategy='default', compression='ZSTD', enable_ttl='true', memtable_type='columnar', num_rows_per_row_group='65536', segment_duration='1d', storage_format='AUTO', ttl='30d', update_mode='OVERWRITE', write_buffer_size='33554432')

SHOW TABLES;
-- expect
Tables
Metrics
cpu
log

SHOW TABLES LIKE '%o%';
-- expect
Tables
log
