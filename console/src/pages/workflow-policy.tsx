// The workflow policy (Settings): the channels a workflow runs, the code's rules, the SIM-swap
// and device-swap checks and the app name the SMS gives, by default and per country. An ADMIN saves it (after a
// fresh passkey check, which the API asks for); a MEMBER reads it. An empty field takes the level
// above: the default's, or mnv's. What the page does not edit (the SMS allow-list and daily cap)
// is sent back as it was read: the PUT replaces the whole policy.
import { useEffect, useState } from 'preact/hooks';
import { api, call, type Schemas } from '../api/client';
import { words } from '../format';
import { useIsAdmin } from '../session';
import { Field, FormError, Loaded, useAction, useLoad } from '../ui';
import { channelNames } from './workflows';

type Settings = Schemas['WorkflowSettingsInput'];
type Channel = 'SILENT' | 'SMS_OTP';

// The orders a policy may name, as the select offers them.
const orders: { value: string; channels: Channel[] }[] = [
  { value: 'SILENT,SMS_OTP', channels: ['SILENT', 'SMS_OTP'] },
  { value: 'SILENT', channels: ['SILENT'] },
  { value: 'SMS_OTP', channels: ['SMS_OTP'] },
  { value: 'SMS_OTP,SILENT', channels: ['SMS_OTP', 'SILENT'] },
];
const orderName = (v: string) => (v === '' ? 'As the default' : v.split(',').map((c) => channelNames[c] ?? words(c)).join(', then '));
const swapModes = ['OFF', 'BLOCK', 'FALLBACK', 'REPORT'] as const;

// The numeric rules, with their bounds (the API's).
const numbers = [
  { key: 'codeLength', label: 'Code length (digits)', min: 4, max: 10 },
  { key: 'codeTtlSeconds', label: 'Code lifetime (seconds)', min: 60, max: 1800 },
  { key: 'maxAttempts', label: 'Attempts per workflow', min: 1, max: 10 },
  { key: 'resendCooldownSeconds', label: 'Wait between resends (seconds)', min: 0, max: 600 },
  { key: 'maxResends', label: 'Resends', min: 0, max: 5 },
  { key: 'silentTimeoutSeconds', label: 'Silent check timeout (seconds)', min: 5, max: 600 },
  { key: 'smsTimeoutSeconds', label: 'SMS step timeout (seconds)', min: 30, max: 3600 },
] as const;
type NumberKey = (typeof numbers)[number]['key'];

/** The form's text values of a policy level: '' is "not set". */
interface Form {
  order: string;
  values: Record<NumberKey, string>;
  simMode: string;
  simMaxAge: string;
  devMode: string;
  devMaxAge: string;
  appName: string;
}

function toForm(s: Partial<Schemas['WorkflowSettings']> | null | undefined): Form {
  const values = {} as Record<NumberKey, string>;
  for (const n of numbers) values[n.key] = s?.[n.key] == null ? '' : String(s[n.key]);
  return {
    order: (s?.channels ?? []).join(','),
    values,
    simMode: s?.simSwap?.mode ?? '',
    simMaxAge: s?.simSwap?.maxAgeHours == null ? '' : String(s.simSwap.maxAgeHours),
    devMode: s?.deviceSwap?.mode ?? '',
    devMaxAge: s?.deviceSwap?.maxAgeHours == null ? '' : String(s.deviceSwap.maxAgeHours),
    appName: s?.appName ?? '',
  };
}

function fromForm(f: Form): Settings {
  const out: Settings = {};
  if (f.order) out.channels = f.order.split(',') as Channel[];
  for (const n of numbers) if (f.values[n.key] !== '') out[n.key] = Number(f.values[n.key]);
  if (f.simMode || f.simMaxAge) out.simSwap = swapOf(f.simMode, f.simMaxAge);
  if (f.devMode || f.devMaxAge) out.deviceSwap = swapOf(f.devMode, f.devMaxAge);
  if (f.appName !== '') out.appName = f.appName;
  return out;
}

/** A swap check's part of a level, the fields left empty left out. */
function swapOf(mode: string, maxAge: string): NonNullable<Settings['simSwap']> {
  return { ...(mode ? { mode: mode as (typeof swapModes)[number] } : {}), ...(maxAge ? { maxAgeHours: Number(maxAge) } : {}) };
}

/** A swap check's two fields (SIM swap's, or device swap's): its mode and maximum age. */
function SwapFields(p: {
  what: string;
  name: string;
  prefix: string;
  mode: string;
  maxAge: string;
  effective: Schemas['WorkflowSettings']['simSwap'] | undefined;
  setMode: (v: string) => void;
  setMaxAge: (v: string) => void;
}) {
  return (
    <>
      <Field label={`${p.what} check`}>
        {(id) => (
          <select id={id} name={`${p.prefix}${p.name}Swap`} value={p.mode} onChange={(e) => p.setMode((e.target as HTMLSelectElement).value)}>
            <option value="">{p.prefix ? 'As the default' : `mnv's default (${words(p.effective?.mode ?? 'OFF')})`}</option>
            {swapModes.map((m) => (
              <option key={m} value={m}>
                {words(m)}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field label={`${p.what} counts as recent within (hours)`} hint={`1 to 2400; empty: ${p.effective?.maxAgeHours ?? 'the default'}.`}>
        {(id, d) => (
          <input
            id={id}
            name={`${p.prefix}${p.name}MaxAgeHours`}
            aria-describedby={d}
            type="number"
            inputMode="numeric"
            min={1}
            max={2400}
            value={p.maxAge}
            placeholder={p.effective?.maxAgeHours == null ? '' : String(p.effective.maxAgeHours)}
            onInput={(e) => p.setMaxAge((e.target as HTMLInputElement).value)}
          />
        )}
      </Field>
    </>
  );
}

/** One level's fields: the default's, or a country's. */
function Level({ form, set, effective, prefix }: { form: Form; set: (f: Form) => void; effective: Schemas['WorkflowSettings'] | null; prefix: string }) {
  return (
    <div class="policy-level">
      <Field label="Channels, in order">
        {(id) => (
          <select id={id} name={`${prefix}channels`} value={form.order} onChange={(e) => set({ ...form, order: (e.target as HTMLSelectElement).value })}>
            <option value="">{prefix ? 'As the default' : `mnv's default (${orderName((effective?.channels ?? []).join(','))})`}</option>
            {orders.map((o) => (
              <option key={o.value} value={o.value}>
                {orderName(o.value)}
              </option>
            ))}
          </select>
        )}
      </Field>
      {numbers.map((n) => (
        <Field key={n.key} label={n.label} hint={`${n.min} to ${n.max}; empty: ${effective?.[n.key] ?? 'the default'}.`}>
          {(id, d) => (
            <input
              id={id}
              name={`${prefix}${n.key}`}
              aria-describedby={d}
              type="number"
              inputMode="numeric"
              min={n.min}
              max={n.max}
              value={form.values[n.key]}
              placeholder={effective?.[n.key] == null ? '' : String(effective[n.key])}
              onInput={(e) => set({ ...form, values: { ...form.values, [n.key]: (e.target as HTMLInputElement).value } })}
            />
          )}
        </Field>
      ))}
      <SwapFields
        what="SIM swap"
        name="sim"
        prefix={prefix}
        mode={form.simMode}
        maxAge={form.simMaxAge}
        effective={effective?.simSwap}
        setMode={(v) => set({ ...form, simMode: v })}
        setMaxAge={(v) => set({ ...form, simMaxAge: v })}
      />
      <SwapFields
        what="Device swap"
        name="device"
        prefix={prefix}
        mode={form.devMode}
        maxAge={form.devMaxAge}
        effective={effective?.deviceSwap}
        setMode={(v) => set({ ...form, devMode: v })}
        setMaxAge={(v) => set({ ...form, devMaxAge: v })}
      />
      <Field label="App name in the SMS" hint="Up to 20 letters, digits or common signs (GSM): “123456 is your Acme verification code”. Empty: no name.">
        {(id, d) => (
          <input
            id={id}
            name={`${prefix}appName`}
            aria-describedby={d}
            maxLength={20}
            autoComplete="off"
            value={form.appName}
            placeholder={effective?.appName ?? ''}
            onInput={(e) => set({ ...form, appName: (e.target as HTMLInputElement).value })}
          />
        )}
      </Field>
    </div>
  );
}

export function WorkflowPolicy() {
  const admin = useIsAdmin();
  const l = useLoad(() => call('GET /v1/api/me/workflow-policy', () => api.GET('/v1/api/me/workflow-policy')), []);
  const [form, setForm] = useState<Form>(toForm(null));
  const [countries, setCountries] = useState<Record<string, Form>>({});
  const [newCountry, setNewCountry] = useState('');
  const [saved, setSaved] = useState('');
  const a = useAction();
  useEffect(() => {
    if (l.state !== 'ready') return;
    setForm(toForm(l.data.policy));
    setCountries(Object.fromEntries(Object.entries(l.data.policy?.countries ?? {}).map(([c, s]) => [c, toForm(s)])));
  }, [l.state, l.data]);
  const code = newCountry.trim().toUpperCase();
  const canAdd = /^[A-Z]{2}$/.test(code) && !(code in countries);
  return (
    <section class="panel" aria-labelledby="workflow-policy-title" id="workflow-policy">
      <h2 id="workflow-policy-title">Workflow policy</h2>
      <p class="muted">
        How a workflow verifies a number: the silent network check, a code by SMS, or both in order, and the code's rules. Overrides by country take
        precedence over the default; an edit applies to the next workflows, never to those running.
        {!admin && ' Only an ADMIN can change it.'}
      </p>
      <Loaded load={l}>
        {(d) => (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void a.run(async () => {
                setSaved('');
                const body: Schemas['WorkflowPolicyInput'] = {
                  // Not on this page: kept as read, or the PUT would clear them.
                  ...(d.policy?.smsCountries?.length ? { smsCountries: d.policy.smsCountries } : {}),
                  ...(d.policy?.dailySmsCap != null ? { dailySmsCap: d.policy.dailySmsCap } : {}),
                  ...fromForm(form),
                  countries: Object.fromEntries(Object.entries(countries).map(([c, f]) => [c, fromForm(f)])),
                };
                await call('PUT /v1/api/me/workflow-policy', () => api.PUT('/v1/api/me/workflow-policy', { body }));
                setSaved('Saved.');
                l.reload();
              });
            }}
          >
            <fieldset disabled={!admin}>
              <legend>Default</legend>
              <Level form={form} set={setForm} effective={d.effective} prefix="" />
            </fieldset>
            {Object.keys(countries)
              .sort()
              .map((c) => (
                <fieldset key={c} disabled={!admin}>
                  <legend>Override for {c}</legend>
                  <Level form={countries[c] ?? toForm(null)} set={(f) => setCountries({ ...countries, [c]: f })} effective={d.effective} prefix={`${c}-`} />
                  <button
                    type="button"
                    class="button"
                    onClick={() => {
                      const next = { ...countries };
                      delete next[c];
                      setCountries(next);
                    }}
                  >
                    Remove the override for {c}
                  </button>
                </fieldset>
              ))}
            <fieldset disabled={!admin} class="inline-form">
              <legend>Add an override</legend>
              <Field label="Country" hint="Two letters, such as GB.">
                {(id, hint) => <input id={id} aria-describedby={hint} maxLength={2} size={4} autoComplete="off" value={newCountry} onInput={(e) => setNewCountry((e.target as HTMLInputElement).value)} />}
              </Field>
              <button
                type="button"
                class="button"
                disabled={!canAdd}
                onClick={() => {
                  setCountries({ ...countries, [code]: toForm(null) });
                  setNewCountry('');
                }}
              >
                Add
              </button>
            </fieldset>
            <FormError error={a.error} />
            <div class="inline-form">
              <button type="submit" class="button button-primary" disabled={!admin || a.busy}>
                Save the policy
              </button>
              <p role="status" class="muted">
                {saved}
              </p>
            </div>
          </form>
        )}
      </Loaded>
    </section>
  );
}
