-- sy_follow is sy_advance for a commit sent while the one before it is still
-- in flight (a pipelined commit): it refuses the transaction unless the last
-- committed seq is exactly p_prev, the last seq of that earlier commit. Its
-- row lock makes it wait for the earlier transaction to end; if that one
-- failed, the seq is not p_prev and this one fails too, writing nothing.
CREATE FUNCTION sy_follow(p_prev bigint, p_first bigint, p_last bigint) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  prev bigint;
BEGIN
  SELECT value INTO prev FROM meta WHERE key = 'last_seq' FOR UPDATE;
  IF prev <> p_prev OR p_first <= prev THEN
    RAISE EXCEPTION 'event seq % does not follow the last committed seq % (an earlier commit failed)', p_first, prev
      USING ERRCODE = 'SY002';
  END IF;
  UPDATE meta SET value = p_last WHERE key = 'last_seq';
END $$;
