#!/bin/sh
# Run once by the postgres image on an empty data directory (compose.yaml): one database and role
# per service, so their migration histories (`_sqlx_migrations`) never meet.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" \
  -v gw_pw="$GATEWAY_DB_PASSWORD" -v poll_pw="$POLLING_DB_PASSWORD" <<'SQL'
CREATE ROLE gateway LOGIN PASSWORD :'gw_pw';
CREATE DATABASE gateway OWNER gateway;
CREATE ROLE polling LOGIN PASSWORD :'poll_pw';
CREATE DATABASE polling OWNER polling;
SQL
