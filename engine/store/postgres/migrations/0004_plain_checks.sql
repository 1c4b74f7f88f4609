-- The commit's checks as plain SQL, which PostgreSQL plans once and runs
-- without plpgsql: sy_advance, sy_follow and sy_fence ran their statements
-- through SPI under their own search_path (a function with a SET clause is
-- called through fmgr_security_definer, which saves and restores the
-- settings), about a fifth of a lone commit's backend CPU (ADR 0005,
-- finding 20). plpgsql is left on the refusing paths only. The functions
-- they replace stay, unused, for a build of version 3 still running
-- against this schema while its nodes upgrade.

-- sy_seq_refused is the slow path of the seq check, one UPDATE of last_seq
-- (commit.go, advanceSQL and followSQL), called only when the value that
-- UPDATE read does not pass. That read may be stale: a pipelined commit
-- (p_prev set, sy_follow's rule) reads last_seq as it was before the commit
-- ahead of it, which still holds the row. So it takes the row lock, waiting
-- for that commit to end, and looks again: it returns p_last if the check
-- now passes (the UPDATE then finds the row changed, reads it again and
-- passes too), and refuses the transaction otherwise. With p_prev NULL the
-- rule is sy_advance's.
CREATE FUNCTION sy_seq_refused(p_prev bigint, p_first bigint, p_last bigint) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  prev bigint;
BEGIN
  SELECT value INTO prev FROM meta WHERE key = 'last_seq' FOR UPDATE;
  IF p_prev IS NULL AND p_first > prev OR p_prev IS NOT NULL AND prev = p_prev AND p_first > prev THEN
    RETURN p_last;
  END IF;
  IF p_prev IS NULL THEN
    RAISE EXCEPTION 'event seq % does not follow the last committed seq %', p_first, prev
      USING ERRCODE = 'SY002';
  END IF;
  RAISE EXCEPTION 'event seq % does not follow the last committed seq % (an earlier commit failed)', p_first, prev
    USING ERRCODE = 'SY002';
END $$;

-- sy_fence_refused raises sy_fence's refusal. The fence (commit.go,
-- fenceSQL) calls it only when its sub-select, which takes the lease row
-- FOR SHARE as sy_fence did (waiting for a takeover in progress and reading
-- the row again after it), finds no lease held by this node and epoch.
CREATE FUNCTION sy_fence_refused(p_lease text, p_node text, p_epoch bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'node % does not hold epoch % of lease %', p_node, p_epoch, p_lease
    USING ERRCODE = 'SY001';
END $$;
