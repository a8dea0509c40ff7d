-- Every pending metadata lock on the server and every other thread's lock on the same
-- object (performance_schema.metadata_locks), for the lock view (lockrace locks):
-- waiter, object type, schema, name, requested type; other thread, its type, GRANTED
-- or PENDING (a request queued ahead).
SELECT pt.PROCESSLIST_ID, p.OBJECT_TYPE, p.OBJECT_SCHEMA, p.OBJECT_NAME, p.LOCK_TYPE,
       gt.PROCESSLIST_ID, g.LOCK_TYPE, g.LOCK_STATUS
FROM performance_schema.metadata_locks p
JOIN performance_schema.threads pt ON pt.THREAD_ID = p.OWNER_THREAD_ID
JOIN performance_schema.metadata_locks g ON g.OBJECT_TYPE = p.OBJECT_TYPE AND g.OBJECT_SCHEMA <=> p.OBJECT_SCHEMA
     AND g.OBJECT_NAME <=> p.OBJECT_NAME AND g.OWNER_THREAD_ID <> p.OWNER_THREAD_ID
JOIN performance_schema.threads gt ON gt.THREAD_ID = g.OWNER_THREAD_ID
WHERE p.LOCK_STATUS = 'PENDING' AND gt.PROCESSLIST_ID IS NOT NULL
