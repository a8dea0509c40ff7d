-- Every InnoDB row or table lock wait on the server, for the lock view (lockrace locks):
-- waiter and blocker thread, the requested lock (mode, type, table, index, data),
-- whether the blocker's own request is the one in the way (queued behind it), and
-- the blocking lock's mode.  INNODB_TRX / INNODB_LOCKS / INNODB_LOCK_WAITS are a
-- snapshot InnoDB refreshes only once nobody has read it for 100 ms.
SELECT r.trx_mysql_thread_id, b.trx_mysql_thread_id, rl.lock_mode, rl.lock_type, rl.lock_table, rl.lock_index,
       rl.lock_data, b.trx_requested_lock_id = w.blocking_lock_id, bl.lock_mode
FROM information_schema.INNODB_LOCK_WAITS w
JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id
JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id
LEFT JOIN information_schema.INNODB_LOCKS rl ON rl.lock_id = w.requested_lock_id
LEFT JOIN information_schema.INNODB_LOCKS bl ON bl.lock_id = w.blocking_lock_id
