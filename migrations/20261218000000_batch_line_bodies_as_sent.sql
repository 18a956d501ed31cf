-- A batch line's body as the client sent it. `jsonb` stored objects with their keys sorted, so a line's
-- `response_format` schema reached the worker with its properties reordered and the answer came back in
-- another order than the same request sent online (the grammar writes properties in declaration order).
-- `json` keeps the text, key order included. Lines stored before this keep the order they were stored in.
ALTER TABLE batch_lines ALTER COLUMN body TYPE JSON USING body::json;
