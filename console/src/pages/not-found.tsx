import { PageHeader } from '../ui';

export function NotFound() {
  return (
    <>
      <PageHeader title="No such page" />
      <p>
        This address is not a page of the console. <a href="/console">Go to the overview</a>.
      </p>
    </>
  );
}
