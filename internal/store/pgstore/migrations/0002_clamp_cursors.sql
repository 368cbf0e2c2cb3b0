-- Cursors never pass their conversation's last seq (SetCursors clamps every
-- write). Lower any cursor written before the clamp existed, so a client
-- that once claimed to have read beyond the end does not keep every later
-- message marked read.
UPDATE {s}.cursors AS c
SET delivered_seq = least(c.delivered_seq, coalesce(cv.last_seq, 0)),
    read_seq      = least(c.read_seq, coalesce(cv.last_seq, 0))
FROM (SELECT cu.conversation_id, conv.last_seq
      FROM {s}.cursors cu LEFT JOIN {s}.conversations conv ON conv.id = cu.conversation_id) AS cv
WHERE cv.conversation_id = c.conversation_id
  AND (c.delivered_seq > coalesce(cv.last_seq, 0) OR c.read_seq > coalesce(cv.last_seq, 0));
