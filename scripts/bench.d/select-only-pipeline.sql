-- pgbench script: pgbench -S's select, eight of them sent in pipeline mode
-- with one sync point, for a random account each (naccounts: 100,000 per
-- unit of scale, given with -D). Not a reference of any row: it shows what
-- pipelining allows, the selects per second being 8 times its tps.
\set aid1 random(1, :naccounts)
\set aid2 random(1, :naccounts)
\set aid3 random(1, :naccounts)
\set aid4 random(1, :naccounts)
\set aid5 random(1, :naccounts)
\set aid6 random(1, :naccounts)
\set aid7 random(1, :naccounts)
\set aid8 random(1, :naccounts)
\startpipeline
SELECT abalance FROM pgbench_accounts WHERE aid = :aid1;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid2;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid3;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid4;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid5;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid6;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid7;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid8;
\endpipeline
