// What a paid action costs, read from GET /v1/api/me/prices (the client's own prices over the
// configured ones), so a dialog says it before the person confirms.
import { api, call, type Schemas } from './api/client';
import { credits } from './format';
import { type Load, useLoad } from './ui';

export type Prices = Load<Schemas['ListPricesResponse']>;

/** The client's prices, loaded once per page. */
export function usePrices() {
  return useLoad(() => call('GET /v1/api/me/prices', () => api.GET('/v1/api/me/prices')), []);
}

/**
 * What an operation of kind (and variant) costs: the variant's price, else the kind's, as the
 * ledger charges; 0 for a kind with no price.
 */
export function priceOf(items: Schemas['Price'][], kind: Schemas['LedgerKind'], variant = ''): number {
  const of = (v: string) => items.find((p) => p.kind === kind && p.variant === v);
  return (of(variant) ?? of(''))?.amount ?? 0;
}

/** The cost of kind in words, e.g. "5 credits", with the loading and error states. */
export function Cost({ prices, kind }: { prices: Prices; kind: Schemas['LedgerKind'] }) {
  if (prices.state === 'loading') return <span class="cost">(reading the price…)</span>;
  if (prices.state === 'error') return <span class="cost">an amount the console could not read ({prices.error.message})</span>;
  const n = priceOf(prices.data.items ?? [], kind);
  return (
    <strong class="cost" data-credits={n}>
      {credits(n)} credit{n === 1 ? '' : 's'}
    </strong>
  );
}
