-- The catalog as tables: information_schema lists every table SHOW TABLES lists (not only
-- those a query reads), named as PostgreSQL names them, and PostgreSQL's functions that
-- clients call over it answer as PostgreSQL's do.

CREATE TABLE cpu (host string TAG, usage double, cores bigint, up boolean,
  ts timestamp NOT NULL, TIMESTAMP KEY(ts)) ENGINE=Analytic;
-- expect affected 0

CREATE TABLE `disk-io` (v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts));
-- expect affected 0

SELECT schema_name FROM information_schema.schemata ORDER BY schema_name;
-- expect
schema_name
information_schema
pg_catalog
public

SELECT table_catalog, table_schema, table_name, table_type, quote_ident(table_name) AS quoted
FROM information_schema.tables ORDER BY table_name;
-- expect
table_catalog | table_schema | table_name | table_type | quoted
gnomon        | public       | cpu        | BASE TABLE | cpu
gnomon        | public       | disk-io    | BASE TABLE | '"disk-io"'

SELECT column_name, ordinal_position, is_nullable, data_type FROM information_schema.columns
WHERE table_name = 'cpu' ORDER BY ordinal_position;
-- expect
column_name | ordinal_position | is_nullable | data_type
tsid        | 1                | NO          | numeric
ts          | 2                | NO          | timestamp without time zone
host        | 3                | YES         | text
usage       | 4                | YES         | double precision
cores       | 5                | YES         | bigint
up          | 6                | YES         | boolean

-- A view of the catalog joins a table as any table does.
INSERT INTO cpu (host, usage, ts) VALUES ('a', 1.5, 1);
-- expect affected 1

SELECT c.host, t.table_type FROM cpu c JOIN information_schema.tables t
  ON t.table_name = 'cpu';
-- expect
host | table_type
a    | BASE TABLE

DROP TABLE `disk-io`;
-- expect affected 0

SELECT count(*) AS n FROM information_schema.columns WHERE table_name = 'disk-io';
-- expect
n
0

SELECT current_setting('server_version_num')::int / 100 AS version,
  current_setting('search_path') AS path;
-- expect
version | path
1500    | '"$user", public'

SELECT current_setting('no_such_setting');
-- expect error InvalidArgument: unrecognized configuration parameter "no_such_setting"

SELECT quote_ident('cpu') AS a, quote_ident('Cpu') AS b, quote_ident('select') AS c,
  quote_ident('a"b') AS d, quote_ident('value') AS e;
-- expect
a   | b       | c          | d        | e
cpu | '"Cpu"' | '"select"' | '"a""b"' | value

SELECT parse_ident('public.cpu')[2] AS a, parse_ident('"My Table"')[1] AS b,
  parse_ident('Public . "X.y"')[2] AS c, array_length(parse_ident('cpu'), 1) AS n;
-- expect
a   | b        | c   | n
cpu | My Table | X.y | 1

SELECT parse_ident('a..b');
-- expect error InvalidArgument: string is not a valid identifier

SELECT array_lower(string_to_array('x,y,z', ','), 1) AS lo,
  array_upper(string_to_array('x,y,z', ','), 1) AS hi,
  array_upper(string_to_array('x,y,z', ','), 2) AS other;
-- expect
lo | hi | other
1  | 3  | NULL

-- PostgreSQL's own catalog, as its drivers read it: tables by OID from the first user OID
-- in the order of their names, their columns by number with their types' OIDs.
CREATE TABLE `another` (v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts));
-- expect affected 0

SELECT n.nspname, c.relname, c.relkind, c.oid FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON c.relnamespace = n.oid ORDER BY c.oid;
-- expect
nspname | relname | relkind | oid
public  | another | r       | 16384
public  | cpu     | r       | 16385

SELECT a.attnum, a.attname, t.typname, format_type(a.atttypid, a.atttypmod) AS type,
  a.attnotnull FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON a.atttypid = t.oid
WHERE a.attrelid = 16385 ORDER BY a.attnum;
-- expect
attnum | attname | typname   | type                        | attnotnull
1      | tsid    | numeric   | numeric                     | true
2      | ts      | timestamp | timestamp without time zone | true
3      | host    | text      | text                        | false
4      | usage   | float8    | double precision            | false
5      | cores   | int8      | bigint                      | false
6      | up      | bool      | boolean                     | false

SELECT current_schemas(true) AS searched, current_schemas(false)[1] AS first,
  pg_table_is_visible(16384) AS visible, pg_get_userbyid(10) AS owner,
  obj_description(16384, 'pg_class') AS comment;
-- expect
searched             | first  | visible | owner  | comment
[pg_catalog, public] | public | true    | gnomon | NULL

SELECT count(*) AS n FROM pg_catalog.pg_description;
-- expect
n
0
