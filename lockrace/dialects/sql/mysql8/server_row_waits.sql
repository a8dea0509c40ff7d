-- Every InnoDB row or table lock wait on the server, for the lock view (lockrace locks),
-- in the columns of mariadb/server_row_waits.sql.  The blocker is named by its engine
-- transaction (INNODB_TRX), as data_lock_waits gives it: BLOCKING_THREAD_ID can be the
-- waiter itself once InnoDB has made another transaction's implicit lock explicit.
SELECT rt.trx_mysql_thread_id, bt.trx_mysql_thread_id, l.LOCK_MODE, l.LOCK_TYPE,
       CONCAT('`', l.OBJECT_SCHEMA, '`.`', l.OBJECT_NAME, '`'), l.INDEX_NAME, l.LOCK_DATA,
       bl.LOCK_STATUS = 'WAITING', bl.LOCK_MODE
FROM performance_schema.data_lock_waits w
JOIN information_schema.INNODB_TRX rt ON rt.trx_id = w.REQUESTING_ENGINE_TRANSACTION_ID
JOIN information_schema.INNODB_TRX bt ON bt.trx_id = w.BLOCKING_ENGINE_TRANSACTION_ID
LEFT JOIN performance_schema.data_locks l ON l.ENGINE_LOCK_ID = w.REQUESTING_ENGINE_LOCK_ID
LEFT JOIN performance_schema.data_locks bl ON bl.ENGINE_LOCK_ID = w.BLOCKING_ENGINE_LOCK_ID
