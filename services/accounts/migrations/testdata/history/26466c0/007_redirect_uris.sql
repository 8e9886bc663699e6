-- The redirect URIs a client registered for mnv's OpenID provider (the CAMARA facade). An
-- authorization request's redirect_uri must be one of them, compared as a whole string: an
-- origin names a site, not the page of it that may receive codes. Clients that existed before
-- have none, so their authorization requests are refused until they register the URIs they
-- use: a URI guessed from their web origins would be exactly the match this table replaces.
-- Read live by the facade for each authorization, like web_origins: nothing caches it, so no
-- notice is needed when it changes.
CREATE TABLE accounts.redirect_uris (
    client_id  uuid        NOT NULL REFERENCES accounts.clients (id) ON DELETE CASCADE,
    uri        text        NOT NULL CHECK (length(uri) BETWEEN 10 AND 512),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client_id, uri)
);
