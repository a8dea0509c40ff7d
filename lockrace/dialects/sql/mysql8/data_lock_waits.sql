-- Which of lockrace's sessions wait on an InnoDB lock, on whom, on what (MySQL 8+,
-- performance_schema: no snapshot cache).
-- {ids}: the sessions' processlist ids, comma-separated integers.
-- The blocker is the blocking transaction's session, found by its table lock: a
-- row lock that InnoDB made explicit for another transaction (a duplicate-key
-- check meeting a row that transaction inserted) carries the thread that made it
-- explicit, so BLOCKING_THREAD_ID is then the waiter itself; a table lock is only
-- ever taken by its own transaction.  (INNODB_TRX names it too, but from a cache
-- that a reader more often than every 100 ms keeps stale.)
SELECT wt.PROCESSLIST_ID, COALESCE(ot.PROCESSLIST_ID, bt.PROCESSLIST_ID), l.LOCK_MODE, l.LOCK_TYPE,
       CONCAT('`', l.OBJECT_SCHEMA, '`.`', l.OBJECT_NAME, '`'), l.INDEX_NAME, l.LOCK_DATA
FROM performance_schema.data_lock_waits w
JOIN performance_schema.threads wt ON wt.THREAD_ID = w.REQUESTING_THREAD_ID
JOIN performance_schema.threads bt ON bt.THREAD_ID = w.BLOCKING_THREAD_ID
LEFT JOIN (SELECT ENGINE_TRANSACTION_ID, MIN(THREAD_ID) AS THREAD_ID FROM performance_schema.data_locks
           WHERE LOCK_TYPE = 'TABLE' GROUP BY ENGINE_TRANSACTION_ID) o
       ON o.ENGINE_TRANSACTION_ID = w.BLOCKING_ENGINE_TRANSACTION_ID
LEFT JOIN performance_schema.threads ot ON ot.THREAD_ID = o.THREAD_ID
LEFT JOIN performance_schema.data_locks l ON l.ENGINE_LOCK_ID = w.REQUESTING_ENGINE_LOCK_ID
WHERE wt.PROCESSLIST_ID IN ({ids})
