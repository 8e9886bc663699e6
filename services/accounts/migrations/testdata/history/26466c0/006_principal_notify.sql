-- Every change that makes a cached principal stale is told on one channel, by NOTIFY in the
-- change's own transaction: PostgreSQL delivers it when (and only if) the change commits, to
-- every accounts replica that LISTENs, and each pushes it to its WatchPrincipals streams.
-- Triggers, not calls in the code, so no path that changes a credential or a client (an admin
-- RPC, mnvctl, an operator's SQL) can forget to.
--
-- accounts.client_changed is the one "client changed" path: the clients trigger calls it, and
-- so must any client configuration kept in another table that goes into the principal (its
-- own trigger, or the store's ClientChanged in the change's transaction).
-- Payload: "<kind>:<client id>[:<credential id>]".

CREATE FUNCTION accounts.client_changed(client uuid) RETURNS void LANGUAGE sql AS $$
    SELECT pg_notify('mnv_accounts_principals', 'client:' || client::text);
$$;

CREATE FUNCTION accounts.notify_client_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM accounts.client_changed(OLD.id);
    RETURN NULL;
END;
$$;

-- Any update of the row: status, features, and whatever a later migration adds to it.
CREATE TRIGGER clients_principal_changed AFTER UPDATE ON accounts.clients
    FOR EACH ROW WHEN (OLD IS DISTINCT FROM NEW) EXECUTE FUNCTION accounts.notify_client_row();
CREATE TRIGGER clients_principal_deleted AFTER DELETE ON accounts.clients
    FOR EACH ROW EXECUTE FUNCTION accounts.notify_client_row();

CREATE FUNCTION accounts.notify_credential_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('mnv_accounts_principals', TG_ARGV[0] || ':' || OLD.client_id::text || ':' || OLD.id::text);
    RETURN NULL;
END;
$$;

-- Not last_used_at, which every use of a key may write: only what decides whether and as what
-- the credential authenticates.
CREATE TRIGGER api_keys_principal_changed AFTER UPDATE ON accounts.api_keys
    FOR EACH ROW WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
        OR OLD.role IS DISTINCT FROM NEW.role OR OLD.client_id IS DISTINCT FROM NEW.client_id
        OR OLD.fingerprint IS DISTINCT FROM NEW.fingerprint)
    EXECUTE FUNCTION accounts.notify_credential_row('api_key');
CREATE TRIGGER api_keys_principal_deleted AFTER DELETE ON accounts.api_keys
    FOR EACH ROW EXECUTE FUNCTION accounts.notify_credential_row('api_key');

CREATE TRIGGER sdk_tokens_principal_changed AFTER UPDATE ON accounts.sdk_tokens
    FOR EACH ROW WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
        OR OLD.client_id IS DISTINCT FROM NEW.client_id OR OLD.fingerprint IS DISTINCT FROM NEW.fingerprint)
    EXECUTE FUNCTION accounts.notify_credential_row('sdk_token');
CREATE TRIGGER sdk_tokens_principal_deleted AFTER DELETE ON accounts.sdk_tokens
    FOR EACH ROW EXECUTE FUNCTION accounts.notify_credential_row('sdk_token');
