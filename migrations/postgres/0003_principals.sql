-- The identity directory: who signed in, for admin views (e.g. effective caps by group).
CREATE TABLE principals (
    sub        TEXT COLLATE "C" PRIMARY KEY,
    email      TEXT,
    name       TEXT,
    groups     TEXT   NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX principals_updated_at ON principals (updated_at);
CREATE INDEX spend_updated_at ON spend (updated_at);
