-- HoraeDB's table options, under HoraeDB's names and values. Those gnomon has a meaning for
-- set it; arena_block_size, memtable_type, the layered memtable's and the size-tiered bucket
-- options are checked and dropped. SHOW CREATE TABLE prints the options by name, as HoraeDB
-- does, with gnomon's values: the memtable is columnar whatever was asked, every table is
-- stored columnar (AUTO lets the engine choose), and compaction is by segment window.

-- The option set HoraeDB prints for a table, as a HoraeDB user pastes it.
CREATE TABLE opts_h (name string TAG, value double, t timestamp NOT NULL, TIMESTAMP KEY(t))
  ENGINE=Analytic WITH(arena_block_size='2097152', compaction_strategy='default',
  compression='ZSTD', enable_ttl='false', memtable_type='skiplist',
  num_rows_per_row_group='8192', segment_duration='', storage_format='AUTO', ttl='7d',
  update_mode='OVERWRITE', write_buffer_size='33554432');
-- expect affected 0

SHOW CREATE TABLE opts_h;
-- expect
Table  | Create Table
opts_h | CREATE TABLE `opts_h` (`tsid` uint64 NOT NULL, `t` timestamp NOT NULL, `name` string TAG, `value` double, PRIMARY KEY(tsid,t), TIMESTAMP KEY(t)) ENGINE=Analytic WITH(compaction_strategy='default', compression='ZSTD', enable_ttl='false', memtable_type='columnar', num_rows_per_row_group='8192', segment_duration='2h', storage_format='AUTO', ttl='7d', update_mode='OVERWRITE', write_buffer_size='33554432')

-- Values with a gnomon meaning are kept: HYBRID is stored columnar, size_tiered compacts by
-- window (time_window), UNCOMPRESSED is no compression, HoraeDB's compaction thresholds are
-- gnomon's.
CREATE TABLE opts_m (v double, t timestamp NOT NULL TIMESTAMP KEY)
  WITH (storage_format='hybrid', compaction_strategy='size_tiered',
  compaction_bucket_low='0.5', compaction_bucket_high='1.5',
  compaction_min_sstable_size='32mb', compaction_min_threshold='2',
  compaction_max_threshold='6', compression='uncompressed', segment_duration='1d',
  ttl='30d', enable_ttl='true', update_mode='APPEND', num_rows_per_row_group='100',
  layered_enable='false', layered_mutable_switch_threshold='3mb');
-- expect affected 0

SHOW CREATE TABLE opts_m;
-- expect
Table  | Create Table
opts_m | CREATE TABLE `opts_m` (`tsid` uint64 NOT NULL, `t` timestamp NOT NULL, `v` double, PRIMARY KEY(tsid,t), TIMESTAMP KEY(t)) ENGINE=Analytic WITH(compaction_max_threshold='6', compaction_min_threshold='2', compaction_strategy='time_window', compression='UNCOMPRESSED', enable_ttl='true', memtable_type='columnar', num_rows_per_row_group='100', segment_duration='1d', storage_format='COLUMNAR', ttl='30d', update_mode='APPEND', write_buffer_size='33554432')

-- The statement SHOW CREATE TABLE prints makes the same table.
DROP TABLE opts_m;
-- expect affected 0

CREATE TABLE `opts_m` (`tsid` uint64 NOT NULL, `t` timestamp NOT NULL, `v` double, PRIMARY KEY(tsid,t), TIMESTAMP KEY(t)) ENGINE=Analytic WITH(compaction_full_after='off', compaction_max_threshold='6', compaction_min_threshold='2', compaction_mode='auto', compaction_strategy='time_window', compaction_target_size='268435456', compression='UNCOMPRESSED', enable_compaction='true', enable_ttl='true', max_versions='100', memtable_type='columnar', num_rows_per_row_group='100', segment_duration='1d', storage_format='COLUMNAR', time_travel='1h', ttl='30d', update_mode='APPEND', write_buffer_size='33554432');
-- expect affected 0

SHOW CREATE TABLE opts_m;
-- expect
Table  | Create Table
opts_m | CREATE TABLE `opts_m` (`tsid` uint64 NOT NULL, `t` timestamp NOT NULL, `v` double, PRIMARY KEY(tsid,t), TIMESTAMP KEY(t)) ENGINE=Analytic WITH(compaction_max_threshold='6', compaction_min_threshold='2', compaction_strategy='time_window', compression='UNCOMPRESSED', enable_ttl='true', memtable_type='columnar', num_rows_per_row_group='100', segment_duration='1d', storage_format='COLUMNAR', ttl='30d', update_mode='APPEND', write_buffer_size='33554432')

-- The kept options are honoured: APPEND keeps both rows of a key, the 30 day TTL hides a row
-- from 1970, and the table reads alike after a flush without compression.
INSERT INTO opts_m (t, v) VALUES ('2200-01-01 00:00:00', 1.0), ('2200-01-01 00:00:00', 2.0),
  (1000, 3.0);
-- expect affected 3

-- flush opts_m

SELECT count(*) AS n, sum(v) AS s FROM opts_m;
-- expect
n | s
2 | 3.0

-- HoraeDB's options change by ALTER TABLE too; the dropped ones are checked there as well.
ALTER TABLE opts_h MODIFY SETTING ttl='10d', enable_ttl='true', arena_block_size='4mb',
  memtable_type='columnar', compression='SNAPPY';
-- expect affected 0

SHOW CREATE TABLE opts_h;
-- expect
Table  | Create Table
opts_h | CREATE TABLE `opts_h` (`tsid` uint64 NOT NULL, `t` timestamp NOT NULL, `name` string TAG, `value` double, PRIMARY KEY(tsid,t), TIMESTAMP KEY(t)) ENGINE=Analytic WITH(compaction_strategy='default', compression='SNAPPY', enable_ttl='true', memtable_type='columnar', num_rows_per_row_group='8192', segment_duration='2h', storage_format='AUTO', ttl='10d', update_mode='OVERWRITE', write_buffer_size='33554432')

-- A value HoraeDB would refuse is refused, with the option named.
CREATE TABLE opts_bad (v double, t timestamp NOT NULL TIMESTAMP KEY) WITH (memtable_type='btree');
-- expect error InvalidArgument: unknown memtable_type 'btree'

CREATE TABLE opts_bad (v double, t timestamp NOT NULL TIMESTAMP KEY) WITH (arena_block_size='big');
-- expect error InvalidArgument: invalid size 'big'

CREATE TABLE opts_bad (v double, t timestamp NOT NULL TIMESTAMP KEY)
  WITH (compaction_strategy='leveled');
-- expect error InvalidArgument: unknown compaction_strategy 'leveled'

CREATE TABLE opts_bad (v double, t timestamp NOT NULL TIMESTAMP KEY)
  WITH (compaction_bucket_low='low');
-- expect error InvalidArgument: invalid number 'low'

ALTER TABLE opts_h MODIFY SETTING layered_enable='maybe';
-- expect error InvalidArgument: invalid boolean 'maybe'

-- SHOW CREATE TABLE prints HoraeDB's option set with gnomon's values (its memtable is
-- columnar; arena_block_size, which gnomon has no equivalent of, is left out), and
-- gnomon's own options only where they are set away from their default.
CREATE TABLE opts_plain (v double, t timestamp NOT NULL TIMESTAMP KEY);
-- expect affected 0

SHOW CREATE TABLE opts_plain;
-- expect
Table      | Create Table
opts_plain | CREATE TABLE `opts_plain` (`tsid` uint64 NOT NULL, `t` timestamp NOT NULL, `v` double, PRIMARY KEY(tsid,t), TIMESTAMP KEY(t)) ENGINE=Analytic WITH(compaction_strategy='default', compression='ZSTD', enable_ttl='false', memtable_type='columnar', num_rows_per_row_group='65536', segment_duration='2h', storage_format='AUTO', ttl='7d', update_mode='OVERWRITE', write_buffer_size='33554432')

CREATE TABLE opts_own (v double, t timestamp NOT NULL TIMESTAMP KEY) WITH (arena_block_size='1mb',
  memtable_type='skiplist', compaction_full_after='1d', compaction_mode='local',
  compaction_target_size='64mb', time_travel='1h', max_versions='7');
-- expect affected 0

SHOW CREATE TABLE opts_own;
-- expect
Table    | Create Table
opts_own | CREATE TABLE `opts_own` (`tsid` uint64 NOT NULL, `t` timestamp NOT NULL, `v` double, PRIMARY KEY(tsid,t), TIMESTAMP KEY(t)) ENGINE=Analytic WITH(compaction_full_after='1d', compaction_mode='local', compaction_strategy='default', compaction_target_size='67108864', compression='ZSTD', enable_ttl='false', max_versions='7', memtable_type='columnar', num_rows_per_row_group='65536', segment_duration='2h', storage_format='AUTO', ttl='7d', update_mode='OVERWRITE', write_buffer_size='33554432')
