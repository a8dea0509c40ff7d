-- Every InnoDB lock wait on the server, on whom, on what (MariaDB); lockrace
-- keeps the rows of its own sessions.
--
-- InnoDB refreshes the snapshot behind these views only when nobody has read
-- it for 100 ms (trx0i_s.cc, CACHE_MIN_IDLE_TIME): asked again sooner, it
-- answers from the same snapshot, so the monitor keeps its last answer for
-- 100 ms instead of asking (and reads all waiters, whatever sessions ask).
SELECT r.trx_mysql_thread_id, b.trx_mysql_thread_id, l.lock_mode, l.lock_type, l.lock_table, l.lock_index, l.lock_data
FROM information_schema.INNODB_LOCK_WAITS w
JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id
JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id
LEFT JOIN information_schema.INNODB_LOCKS l ON l.lock_id = w.requested_lock_id
