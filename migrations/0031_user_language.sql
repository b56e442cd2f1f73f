-- A console user's language ('' = follow the browser's Accept-Language).
ALTER TABLE users ADD COLUMN language TEXT NOT NULL DEFAULT '';
