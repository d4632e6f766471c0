-- HoraeDB's SQL dialect, as far as gnomon takes it (docs/compatibility.md).

-- Table names (and aliases) may start with digits, unquoted, as in HoraeDB (MySQL): a
-- word is a name when a letter or underscore follows its digits; 1e5 and 0x1F stay
-- numbers. Column names starting with a digit are refused by the engine, as before.
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
host  | string    | false      | true        | true   | true
value | double    | false      | true        | false  | false
t     | timestamp | true       | false       | false  | false

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
