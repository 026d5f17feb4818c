-- tokenscope's derived tables and its summary, as SQL that runs unchanged on polars (tokenscope's own runner,
-- `tokenscope summary --sql`) and on Apache Spark SQL (`sql/spark_summary.py`, or your own job).
--
-- The input is one table, `trace`: the records of a trace in format v1 (docs/TRACE_FORMAT.md) as its Parquet files
-- hold them, one column per field, `kind` telling records apart. Any number of files, hive partitions allowed.
-- The figures follow the format's "Derived figures"; every percentile is nearest-rank (the value at 1-based rank
-- ceil(p/100 x n)), computed with ranks, not with an engine's approximate percentile.
--
-- Each statement below is preceded by `-- view: NAME`. A runner executes them in order and registers each result
-- under its name, so that later statements read earlier ones. `summary` has a row per latency figure (ttft, tpot,
-- e2e, queue, itl) with the trace's totals repeated on each.
-- Kept to what both engines read alike: no CREATE VIEW, no quoted names, casts to DOUBLE before dividing, equality
-- joins only, and the window functions both have. Latencies are ranked in nanoseconds, as the trace writes them, and turned into ms by the runner
-- (x / 1e6): an engine that divides by multiplying with the reciprocal would otherwise change the last digit.

-- view: requests_raw
SELECT request_id, COALESCE(source, 'engine') AS source, model, app_id, user_id, arrival_ns, scheduled_ns,
       first_token_ns, finished_ns, input_tokens, cached_tokens, output_tokens, finish_reason, status
FROM trace
WHERE kind = 'request'

-- view: tokens
SELECT request_id, index, emitted_ns, iteration
FROM trace
WHERE kind = 'token'

-- view: token_counts
SELECT request_id, COUNT(*) AS token_records, MAX(index) AS last_index
FROM tokens
GROUP BY request_id

-- view: first_tokens
SELECT request_id, emitted_ns AS first_emitted_ns
FROM tokens
WHERE index = 0

-- view: last_tokens
SELECT t.request_id AS request_id, t.emitted_ns AS last_emitted_ns
FROM tokens t
JOIN token_counts c ON t.request_id = c.request_id AND t.index = c.last_index

-- view: request_times
SELECT r.request_id AS request_id, r.source AS source, r.model AS model, r.app_id AS app_id, r.user_id AS user_id,
       r.arrival_ns AS arrival_ns, r.input_tokens AS input_tokens, r.cached_tokens AS cached_tokens,
       COALESCE(r.finish_reason, '(none)') AS finish_reason,
       COALESCE(r.output_tokens, c.token_records, 0) AS output_tokens,
       r.scheduled_ns - r.arrival_ns AS queue_ns,
       COALESCE(r.first_token_ns, f.first_emitted_ns) - r.arrival_ns AS ttft_ns,
       COALESCE(r.finished_ns, l.last_emitted_ns) - r.arrival_ns AS e2e_ns,
       COALESCE(r.finished_ns, l.last_emitted_ns, r.arrival_ns) AS end_ns
FROM requests_raw r
LEFT JOIN token_counts c ON r.request_id = c.request_id
LEFT JOIN first_tokens f ON r.request_id = f.request_id
LEFT JOIN last_tokens l ON r.request_id = l.request_id

-- view: requests
SELECT request_id, source, model, app_id, user_id, arrival_ns, end_ns, input_tokens, cached_tokens, finish_reason,
       output_tokens, queue_ns, ttft_ns, e2e_ns,
       CASE WHEN output_tokens >= 2
            THEN CAST(e2e_ns - ttft_ns AS DOUBLE) / CAST(output_tokens - 1 AS DOUBLE) END AS tpot_ns,
       CAST(queue_ns AS DOUBLE) / 1000000.0 AS queue_ms,
       CAST(ttft_ns AS DOUBLE) / 1000000.0 AS ttft_ms,
       CAST(e2e_ns AS DOUBLE) / 1000000.0 AS e2e_ms,
       CASE WHEN output_tokens >= 2
            THEN CAST(e2e_ns - ttft_ns AS DOUBLE) / CAST(output_tokens - 1 AS DOUBLE) / 1000000.0 END AS tpot_ms
FROM request_times

-- view: token_mismatches
SELECT r.request_id AS request_id, r.output_tokens AS output_tokens, c.token_records AS token_records
FROM requests_raw r
JOIN token_counts c ON r.request_id = c.request_id
WHERE r.output_tokens IS NOT NULL AND r.output_tokens <> c.token_records

-- view: itl
-- One gap per emission: the tokens of a request that came out together (one step's, a speculative verify step's
-- several among them; where a token does not name its step, those under 1 ms apart) count once, the gap from the
-- token before the emission (docs/TRACE_FORMAT.md, "Derived figures"). None across a gap in the indices. A window
-- rather than a self-join: polars holds a file's tokens once instead of building a hash table of them.
SELECT request_id, itl_ns
FROM (SELECT request_id,
             index - LAG(index) OVER (PARTITION BY request_id ORDER BY index) AS step,
             emitted_ns - LAG(emitted_ns) OVER (PARTITION BY request_id ORDER BY index) AS itl_ns,
             iteration,
             LAG(iteration) OVER (PARTITION BY request_id ORDER BY index) AS prev_iteration
      FROM tokens) gaps
WHERE step = 1
  AND CASE WHEN iteration IS NOT NULL AND prev_iteration IS NOT NULL THEN iteration <> prev_iteration
           ELSE itl_ns >= 1000000 END

-- view: latencies
SELECT 'ttft' AS figure, CAST(ttft_ns AS DOUBLE) AS v FROM requests WHERE ttft_ns IS NOT NULL
UNION ALL SELECT 'tpot' AS figure, tpot_ns AS v FROM requests WHERE tpot_ns IS NOT NULL
UNION ALL SELECT 'e2e' AS figure, CAST(e2e_ns AS DOUBLE) AS v FROM requests WHERE e2e_ns IS NOT NULL
UNION ALL SELECT 'queue' AS figure, CAST(queue_ns AS DOUBLE) AS v FROM requests WHERE queue_ns IS NOT NULL
UNION ALL SELECT 'itl' AS figure, CAST(itl_ns AS DOUBLE) AS v FROM itl

-- view: ranked
SELECT figure, v,
       ROW_NUMBER() OVER (PARTITION BY figure ORDER BY v) AS rk,
       COUNT(*) OVER (PARTITION BY figure) AS n
FROM latencies

-- view: distributions
-- In nanoseconds, as every latency here.
SELECT figure, MAX(n) AS count, AVG(v) AS mean,
       MAX(CASE WHEN rk = FLOOR((n * 50 + 99) / 100.0) THEN v END) AS p50,
       MAX(CASE WHEN rk = FLOOR((n * 90 + 99) / 100.0) THEN v END) AS p90,
       MAX(CASE WHEN rk = FLOOR((n * 95 + 99) / 100.0) THEN v END) AS p95,
       MAX(CASE WHEN rk = FLOOR((n * 99 + 99) / 100.0) THEN v END) AS p99,
       MAX(v) AS max
FROM ranked
GROUP BY figure

-- view: totals
SELECT COUNT(*) AS requests,
       SUM(COALESCE(input_tokens, 0)) AS input_tokens,
       SUM(COALESCE(cached_tokens, 0)) AS cached_tokens,
       SUM(output_tokens) AS output_tokens,
       MAX(end_ns) - MIN(arrival_ns) AS span_ns
FROM requests

-- view: summary
SELECT t.requests AS requests, t.input_tokens AS input_tokens, t.cached_tokens AS cached_tokens,
       t.output_tokens AS output_tokens, t.span_ns AS span_ns,
       d.figure AS figure, d.count AS count, d.mean AS mean, d.p50 AS p50, d.p90 AS p90, d.p95 AS p95,
       d.p99 AS p99, d.max AS max
FROM totals t CROSS JOIN distributions d
ORDER BY figure
