-- The notices of principal changes (migration 006) are sent by the store, in the transaction
-- of each change, on the same channel with the same payload: a table distributed by client
-- runs no trigger where anybody listens (docs/operations.md#past-one-postgresql). Whoever
-- changes a credential or a client row by hand sends the notice too, in the same transaction:
--   SELECT pg_notify('mnv_accounts_principals', 'api_key:<client id>:<key id>');
--   (or 'sdk_token:<client id>:<token id>', 'client:<client id>')
DROP TRIGGER clients_principal_changed ON accounts.clients;
DROP TRIGGER clients_principal_deleted ON accounts.clients;
DROP TRIGGER api_keys_principal_changed ON accounts.api_keys;
DROP TRIGGER api_keys_principal_deleted ON accounts.api_keys;
DROP TRIGGER sdk_tokens_principal_changed ON accounts.sdk_tokens;
DROP TRIGGER sdk_tokens_principal_deleted ON accounts.sdk_tokens;
DROP FUNCTION accounts.notify_client_row();
DROP FUNCTION accounts.notify_credential_row();
DROP FUNCTION accounts.client_changed(uuid);
