-- Which of lockrace's sessions wait on an InnoDB lock, on whom, on what (MySQL 8,
-- performance_schema: no snapshot cache).
-- {ids}: the sessions' processlist ids, comma-separated integers.
SELECT wt.PROCESSLIST_ID, bt.PROCESSLIST_ID, l.LOCK_MODE, l.LOCK_TYPE,
       CONCAT('`', l.OBJECT_SCHEMA, '`.`', l.OBJECT_NAME, '`'), l.INDEX_NAME, l.LOCK_DATA
FROM performance_schema.data_lock_waits w
JOIN performance_schema.threads wt ON wt.THREAD_ID = w.REQUESTING_THREAD_ID
JOIN performance_schema.threads bt ON bt.THREAD_ID = w.BLOCKING_THREAD_ID
LEFT JOIN performance_schema.data_locks l ON l.ENGINE_LOCK_ID = w.REQUESTING_ENGINE_LOCK_ID
WHERE wt.PROCESSLIST_ID IN ({ids})
