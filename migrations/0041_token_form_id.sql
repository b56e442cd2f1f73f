-- The console's form that creates an API token carries an id of its own,
-- made when the page is drawn (store.CreateTokenOnce): sent again (a reload
-- of the page that shows the new token, a double click), it finds the token
-- it made instead of making a second one that nobody holds.
ALTER TABLE api_tokens ADD COLUMN form_id TEXT;
CREATE UNIQUE INDEX api_tokens_form_id ON api_tokens (form_id);
