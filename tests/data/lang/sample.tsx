import React, { useState } from 'react';

export function Counter({ start }: { start: number }) {
  const [count, setCount] = useState<number>(start);
  return (
    <button onClick={() => setCount(count + 1)}>
      {count}
    </button>
  );
}

export const Label = (props: { text: string }) => {
  return <span>{props.text}</span>;
};
