-- weir's formatting functions for DuckDB (docs/ANALYSIS.md):
--   duckdb -init docs/duckdb-macros.sql
CREATE MACRO ip_text(a) AS CASE
  WHEN a IS NULL THEN NULL
  WHEN substring(hex(a), 1, 24) = '00000000000000000000FFFF' THEN
    concat_ws('.',
      ('0x' || substring(hex(a), 25, 2))::INTEGER, ('0x' || substring(hex(a), 27, 2))::INTEGER,
      ('0x' || substring(hex(a), 29, 2))::INTEGER, ('0x' || substring(hex(a), 31, 2))::INTEGER)
  ELSE rtrim(lower(regexp_replace(hex(a), '(....)', '\1:', 'g')), ':')
END;
CREATE MACRO mac_text(m) AS rtrim(lower(regexp_replace(hex(m), '(..)', '\1:', 'g')), ':');
