-- The page origins (scheme://host[:port], as a browser writes its Origin header) from which a
-- client's browser flows may be captured. A client with none cannot be captured from any page.
CREATE TABLE accounts.web_origins (
    client_id  uuid        NOT NULL REFERENCES accounts.clients (id) ON DELETE CASCADE,
    origin     text        NOT NULL CHECK (length(origin) BETWEEN 8 AND 300),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client_id, origin)
);
