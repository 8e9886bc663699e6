import { render } from 'preact';
import './console.css';
import { App } from './app';

const root = document.getElementById('app')!;
// The "Loading" placeholder of index.html: render() adds beside what is there, not instead.
root.replaceChildren();
render(<App />, root);
