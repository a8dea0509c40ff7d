-- Which of lockrace's sessions wait on a heavyweight lock, on whom, on what.
-- PostgreSQL 14 and later (pg_locks.waitstart).  Parameter: the session pids.
--
--   pid, blocking pids, the lock waited on (pg_locks columns), the tuple lock
--   the waiter already holds (names the row while it waits for a transaction
--   id), seconds waited, and the blockers that are not client backends
--   (startup process replaying WAL on a standby, autovacuum, ...).
SELECT a.pid,
       pg_blocking_pids(a.pid),
       w.locktype, w.mode, w.relation::regclass::text, w.page, w.tuple,
       w.transactionid::text, w.classid, w.objid, w.objsubid,
       t.relation::regclass::text, t.page, t.tuple,
       extract(epoch FROM clock_timestamp() - w.waitstart)::float8,
       (SELECT array_agg(b.pid || ':' || b.backend_type) FROM pg_stat_activity b
        WHERE b.pid = ANY(pg_blocking_pids(a.pid)) AND b.backend_type <> 'client backend')
FROM pg_stat_activity a
LEFT JOIN LATERAL (SELECT * FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted LIMIT 1) w ON true
LEFT JOIN LATERAL (SELECT * FROM pg_locks l WHERE l.pid = a.pid AND l.granted AND l.locktype = 'tuple' LIMIT 1) t ON true
WHERE a.pid = ANY(%s) AND a.wait_event_type = 'Lock'
