-- The backlog: one row per prompt. Sources insert `queued` rows at any time; workers claim them.
CREATE TABLE IF NOT EXISTS tasks (
  id            BIGSERIAL PRIMARY KEY,
  prompt        TEXT        NOT NULL,
  -- NULL lets the admission API pick a model with capacity; otherwise the task is pinned to it.
  model         TEXT,
  status        TEXT        NOT NULL DEFAULT 'queued'
                CHECK (status IN ('queued', 'running', 'done', 'dead')),
  answer        TEXT,
  attempts      INTEGER     NOT NULL DEFAULT 0,
  claimed_by    TEXT,
  -- A fresh token per claim: only the holder of the current claim may finish the task.
  claim_token   TEXT,
  -- queued: not before this time (retry backoff); running: the claim expires at this time.
  visible_after TIMESTAMPTZ NOT NULL DEFAULT now(),
  created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  finished_at   TIMESTAMPTZ,
  last_error    TEXT
);

-- Claims scan only unfinished rows, oldest visibility first.
CREATE INDEX IF NOT EXISTS tasks_claimable ON tasks (visible_after, id) WHERE status IN ('queued', 'running');
